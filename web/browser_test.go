package web_test

import (
	"net/http/httptest"
	"testing"
)

func testBrowser(t *testing.T, l *dashLedger, srv *httptest.Server) {}
