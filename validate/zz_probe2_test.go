package validate

import "testing"

func TestZZIDs(t *testing.T) {
	for _, s := range []string{
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"id":"#/properties/a","type":"string"},"b":{"id":"#/properties/b","type":"integer"}}}`,
		`{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","properties":{"a":{"$id":"#/properties/a","type":"string"}}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"id":"item","type":"string"},"b":{"id":"item","type":"string"}}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"id":"item.json","type":"string"},"b":{"id":"item.json","type":"integer"}}}`,
		`{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","properties":{"a":{"$id":"#item","type":"string"},"b":{"$id":"#item","type":"integer"}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"$id":"#/properties/a","type":"string"}}}`,
	} {
		_, err := Compile([]byte(s))
		t.Logf("%s\n  -> %v", s, err)
	}
}
