package evidence

import (
	"github.com/fixpoint-dev/fixpoint"

	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// decode reads a JSON value the way validate and repair do: numbers as
// json.Number.
func decode(t testing.TB, text string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	return v
}

// gradeCase is one value (as JSON) aligned to one source: the grade it
// wants and the text of the source its span covers ("" for none).
type gradeCase struct {
	name  string
	src   string
	val   string
	grade fixpoint.Grade
	span  string
}

func runGrades(t *testing.T, cases []gradeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Align(c.src, decode(t, `{"v":`+c.val+`}`), nil)
			if len(r.Leaves) != 1 {
				t.Fatalf("Align(%q, %s) = %d leaves, want 1: %+v", c.src, c.val, len(r.Leaves), r.Leaves)
			}
			l := r.Leaves[0]
			got := string([]rune(c.src)[l.Start:l.End])
			if l.Path != "/v" || l.Grade != c.grade || got != c.span {
				t.Errorf("value %s in %q: %s grade %s span [%d,%d) %q, want grade %s span %q",
					c.val, c.src, l.Path, l.Grade, l.Start, l.End, got, c.grade, c.span)
			}
		})
	}
}

func TestGradeText(t *testing.T) {
	t.Parallel()
	runGrades(t, []gradeCase{
		// English
		{"en exact", "Invoice from Acme Corp, due soon.", `"Acme Corp"`, fixpoint.GradeExact, "Acme Corp"},
		{"en case", "Invoice from ACME CORP, due soon.", `"Acme Corp"`, fixpoint.GradeNormalized, "ACME CORP"},
		{"en white space", "Invoice from Acme \n\t Corp, due soon.", `"Acme Corp"`, fixpoint.GradeNormalized, "Acme \n\t Corp"},
		{"en value's own white space", "Invoice from Acme Corp.", `"  Acme   Corp "`, fixpoint.GradeNormalized, "Acme Corp"},
		{"en nbsp", "Invoice from Acme\u00a0Corp.", `"Acme Corp"`, fixpoint.GradeNormalized, "Acme\u00a0Corp"},
		{"en soft hyphen", "the co\u00adoperative shop", `"cooperative"`, fixpoint.GradeNormalized, "co\u00adoperative"},
		{"en ligature (NFKC)", "the \ufb01nance team", `"finance"`, fixpoint.GradeNormalized, "\ufb01nance"},
		{"en full-width (NFKC)", "vendor \uff21\uff23\uff2d\uff25 Corp", `"ACME Corp"`, fixpoint.GradeNormalized, "\uff21\uff23\uff2d\uff25 Corp"},
		{"exact later beats normalised first", "ACME Corp, then Acme Corp", `"Acme Corp"`, fixpoint.GradeExact, "Acme Corp"},
		{"en inside a word", "Signed by Cohenberg.", `"Cohen"`, fixpoint.GradeNone, ""},
		{"en inside a word, then alone", "Also Al said", `"Al"`, fixpoint.GradeExact, "Al"},
		{"en absent", "Invoice from Acme Corp.", `"Globex"`, fixpoint.GradeNone, ""},
		// German
		{"de exact", "Rechnung der Müller GmbH vom Januar", `"Müller GmbH"`, fixpoint.GradeExact, "Müller GmbH"},
		{"de diacritics", "Rechnung der Müller GmbH", `"Muller GmbH"`, fixpoint.GradeNormalized, "Müller GmbH"},
		{"de sharp s", "Lieferadresse: Hauptstraße 5", `"HAUPTSTRASSE"`, fixpoint.GradeNormalized, "Hauptstraße"},
		{"de decomposed umlaut", "Rechnung der Mu\u0308ller GmbH", `"Müller GmbH"`, fixpoint.GradeNormalized, "Mu\u0308ller GmbH"},
		{"de umlaut not inside a word", "Rechnung der Mu\u0308ller GmbH", `"Mu"`, fixpoint.GradeNone, ""},
		// French
		{"fr exact", "Facture de la Société Générale, Paris", `"Société Générale"`, fixpoint.GradeExact, "Société Générale"},
		{"fr diacritics and case", "Facture de la Société Générale, Paris", `"SOCIETE GENERALE"`, fixpoint.GradeNormalized, "Société Générale"},
		{"fr elision", "selon l’accord de l'entreprise", `"l’accord"`, fixpoint.GradeExact, "l’accord"},
		// Japanese and Chinese: no spaces between words
		{"ja exact inside a sentence", "昨日東京タワーに行きました。", `"東京タワー"`, fixpoint.GradeExact, "東京タワー"},
		{"ja half-width kana", "昨日ﾄｳｷｮｳﾀﾜｰに行きました", `"トウキョウタワー"`, fixpoint.GradeNormalized, "ﾄｳｷｮｳﾀﾜｰ"},
		{"ja voiced half-width kana", "ｶﾞｽ料金のお知らせ", `"ガス料金"`, fixpoint.GradeNormalized, "ｶﾞｽ料金"},
		{"ja voicing is no diacritic", "ガラスの破損", `"カラス"`, fixpoint.GradeNone, ""},
		{"ja full-width space", "株式会社\u3000山田製作所", `"株式会社 山田製作所"`, fixpoint.GradeNormalized, "株式会社\u3000山田製作所"},
		{"zh exact", "地址是北京市朝阳区建国路88号", `"北京市朝阳区"`, fixpoint.GradeExact, "北京市朝阳区"},
		{"ko particle", "서울에서 만나요", `"서울"`, fixpoint.GradeExact, "서울"},
		{"zh absent", "地址是北京市朝阳区建国路88号", `"上海市"`, fixpoint.GradeNone, ""},
	})
}

func TestGradeNumbers(t *testing.T) {
	t.Parallel()
	runGrades(t, []gradeCase{
		{"as written", "Total: 1249.99 due", `1249.99`, fixpoint.GradeExact, "1249.99"},
		{"english grouping", "Total: 1,249.99 due", `1249.99`, fixpoint.GradeNormalized, "1,249.99"},
		{"continental grouping", "Gesamt: 1.249,99 fällig", `1249.99`, fixpoint.GradeNormalized, "1.249,99"},
		{"space grouping", "Total : 3 450,00 à payer", `3450`, fixpoint.GradeNormalized, "3 450,00"},
		{"nbsp grouping", "Total : 3\u00a0450,00 €", `3450`, fixpoint.GradeNormalized, "3\u00a0450,00"},
		{"narrow nbsp grouping", "Total : 3\u202f450,00 €", `3450.0`, fixpoint.GradeNormalized, "3\u202f450,00"},
		{"swiss grouping", "Total: CHF 1'249.95", `1249.95`, fixpoint.GradeNormalized, "1'249.95"},
		{"currency code before", "Budget: USD 18,500 per year", `18500`, fixpoint.GradeNormalized, "18,500"},
		{"currency code glued", "Budget: USD18,500 per year", `18500`, fixpoint.GradeNormalized, "18,500"},
		{"currency symbol after", "Preis: 18.500 € netto", `18500`, fixpoint.GradeNormalized, "18.500"},
		{"dollar sign", "Total: $1,249.99.", `1249.99`, fixpoint.GradeNormalized, "1,249.99"},
		{"yen", "合計1,249円です", `1249`, fixpoint.GradeNormalized, "1,249"},
		{"full-width digits", "合計１，２４９円", `1249`, fixpoint.GradeNormalized, "１，２４９"},
		{"ambiguous read as german", "Menge: 1.249 Stück", `1249`, fixpoint.GradeNormalized, "1.249"},
		{"ambiguous read as english", "ratio 1.249 overall", `1.249`, fixpoint.GradeExact, "1.249"},
		{"ambiguous comma read as english", "1,249 units", `1249`, fixpoint.GradeNormalized, "1,249"},
		{"ambiguous comma read as german", "Faktor 1,249", `1.249`, fixpoint.GradeNormalized, "1,249"},
		{"decimal comma", "Faktor 1,5", `1.5`, fixpoint.GradeNormalized, "1,5"},
		{"trailing zeros", "Total 12.50", `12.5`, fixpoint.GradeNormalized, "12.50"},
		{"exponent", "about 1,000 people", `1E3`, fixpoint.GradeNormalized, "1,000"},
		{"negative", "Balance: -5 today", `-5`, fixpoint.GradeExact, "-5"},
		{"minus sign", "Balance: \u22125 today", `-5`, fixpoint.GradeNormalized, "\u22125"},
		{"sign is not dropped", "Balance: -5 today", `5`, fixpoint.GradeNone, ""},
		{"hyphen is no sign", "pages 10-15", `15`, fixpoint.GradeExact, "15"},
		{"part of a spaced list", "rooms 3 450", `450`, fixpoint.GradeExact, "450"},
		{"first match as written wins", "1,249.99 then 1249.99", `1249.99`, fixpoint.GradeExact, "1249.99"},
		{"first match in source order", "1.249,99 then 1,249.99", `1249.99`, fixpoint.GradeNormalized, "1.249,99"},
		{"a date's day", "due 15.01.2027", `15`, fixpoint.GradeExact, "15"},
		{"230 is not 320", "Invoice 320 paid", `230`, fixpoint.GradeNone, ""},
		{"230 is not in 2301", "Invoice 2301 paid", `230`, fixpoint.GradeNone, ""},
		{"glued to letters", "Part A230 shipped", `230`, fixpoint.GradeNone, ""},
		{"23 is not 2.3", "ratio 2.3", `23`, fixpoint.GradeNone, ""},
		{"numbers are never fuzzy", "Invoice 1249.98", `1249.99`, fixpoint.GradeNone, ""},
		// numbers written in a string value
		{"string with currency", "Total: 1249.99 USD", `"$1,249.99"`, fixpoint.GradeNormalized, "1249.99"},
		{"string continental", "Total: $1,249.99", `"1.249,99 €"`, fixpoint.GradeNormalized, "1,249.99"},
		{"string as written", "Budget: USD 18,500 per year", `"USD 18,500"`, fixpoint.GradeExact, "USD 18,500"},
	})
}

func TestGradeDates(t *testing.T) {
	t.Parallel()
	runGrades(t, []gradeCase{
		{"iso", "due 2027-01-15.", `"2027-01-15"`, fixpoint.GradeExact, "2027-01-15"},
		{"iso slashes", "due 2027/01/15.", `"2027-01-15"`, fixpoint.GradeNormalized, "2027/01/15"},
		{"iso date-time", "at 2027-01-15T10:30:00Z", `"2027-01-15"`, fixpoint.GradeNormalized, "2027-01-15"},
		{"german dots", "fällig am 15.01.2027.", `"2027-01-15"`, fixpoint.GradeNormalized, "15.01.2027"},
		{"german dots short", "fällig am 5.1.2027", `"2027-01-05"`, fixpoint.GradeNormalized, "5.1.2027"},
		{"us slashes", "due 01/15/2027", `"2027-01-15"`, fixpoint.GradeNormalized, "01/15/2027"},
		{"day first slashes", "due 15/01/2027", `"2027-01-15"`, fixpoint.GradeNormalized, "15/01/2027"},
		{"ambiguous slashes, month first", "due 01/02/2027", `"2027-01-02"`, fixpoint.GradeNormalized, "01/02/2027"},
		{"ambiguous slashes, day first", "due 01/02/2027", `"2027-02-01"`, fixpoint.GradeNormalized, "01/02/2027"},
		{"dots are day first only", "fällig am 02.01.2027", `"2027-02-01"`, fixpoint.GradeNone, ""},
		{"en day month year", "signed on 1 January 2027 in London", `"2027-01-01"`, fixpoint.GradeNormalized, "1 January 2027"},
		{"en ordinal of", "signed on the 1st of January, 2027", `"2027-01-01"`, fixpoint.GradeNormalized, "1st of January, 2027"},
		{"en month day year", "signed on January 1, 2027.", `"2027-01-01"`, fixpoint.GradeNormalized, "January 1, 2027"},
		{"en ordinal", "due March 3rd, 2027", `"2027-03-03"`, fixpoint.GradeNormalized, "March 3rd, 2027"},
		{"en abbreviated", "due Jan. 15 2027", `"2027-01-15"`, fixpoint.GradeNormalized, "Jan. 15 2027"},
		{"en dashes", "due 15-Jan-2027", `"2027-01-15"`, fixpoint.GradeNormalized, "15-Jan-2027"},
		{"de", "fällig am 3. März 2027", `"2027-03-03"`, fixpoint.GradeNormalized, "3. März 2027"},
		{"de without diacritic", "fällig am 3. Maerz 2027", `"2027-03-03"`, fixpoint.GradeNormalized, "3. Maerz 2027"},
		{"de december", "vom 24. Dezember 2026", `"2026-12-24"`, fixpoint.GradeNormalized, "24. Dezember 2026"},
		{"fr", "payable le 3 mars 2027", `"2027-03-03"`, fixpoint.GradeNormalized, "3 mars 2027"},
		{"fr premier", "payable le 1er mars 2027", `"2027-03-01"`, fixpoint.GradeNormalized, "1er mars 2027"},
		{"fr accents", "le 15 février 2027", `"2027-02-15"`, fixpoint.GradeNormalized, "15 février 2027"},
		{"fr août", "le 15 août 2027", `"2027-08-15"`, fixpoint.GradeNormalized, "15 août 2027"},
		{"es", "el 3 de marzo de 2027", `"2027-03-03"`, fixpoint.GradeNormalized, "3 de marzo de 2027"},
		{"it", "il 3 marzo 2027", `"2027-03-03"`, fixpoint.GradeNormalized, "3 marzo 2027"},
		{"ja", "支払期日は2026年12月1日です", `"2026-12-01"`, fixpoint.GradeNormalized, "2026年12月1日"},
		{"ja spaced", "期日 2026 年 12 月 1 日", `"2026-12-01"`, fixpoint.GradeNormalized, "2026 年 12 月 1 日"},
		{"ja full-width digits", "期日２０２６年１２月１日", `"2026-12-01"`, fixpoint.GradeNormalized, "２０２６年１２月１日"},
		{"zh", "日期：2026年12月1号", `"2026-12-01"`, fixpoint.GradeNormalized, "2026年12月1号"},
		{"ko", "2026년 12월 1일까지", `"2026-12-01"`, fixpoint.GradeNormalized, "2026년 12월 1일"},
		{"written value", "due 2027-01-15", `"15.01.2027"`, fixpoint.GradeNormalized, "2027-01-15"},
		{"written value, words", "due 15.01.2027", `"January 15, 2027"`, fixpoint.GradeNormalized, "15.01.2027"},
		{"another day", "signed on 15 January 2027", `"2027-01-16"`, fixpoint.GradeNone, ""},
		{"no such day", "on 31.02.2027", `"2027-02-31"`, fixpoint.GradeNone, ""},
		{"month name inside a word", "Marshall 3 2027", `"2027-03-03"`, fixpoint.GradeNone, ""},
	})
}

func TestGradeFuzzy(t *testing.T) {
	t.Parallel()
	runGrades(t, []gradeCase{
		{"one letter missing", "Contact: Jonathan Livingstone-Smith, London", `"Jonathan Livingston-Smith"`, fixpoint.GradeFuzzy, "Jonathan Livingstone-Smith"},
		{"one letter extra", "Contact: Jonathan Livingston, London", `"Jonathan Livingstone"`, fixpoint.GradeFuzzy, "Jonathan Livingston"},
		{"one letter replaced", "Delivered to Bahnhofstrasse Zuerich", `"Bahnhofstrasse Zuarich"`, fixpoint.GradeFuzzy, "Bahnhofstrasse Zuerich"},
		{"punctuation", "Name: Smith John, Account 4", `"Smith, John"`, fixpoint.GradeFuzzy, "Smith John"},
		{"hyphenation", "our email support desk", `"e-mail support"`, fixpoint.GradeFuzzy, "email support"},
		{"spacing in CJK", "東京・タワーに行った", `"東京タワー"`, fixpoint.GradeFuzzy, "東京・タワー"},
		{"a different first name", "Paid to Dana Cohen on Monday", `"David Cohen"`, fixpoint.GradeNone, ""},
		{"a different name in a long string", "Order shipped to Tim Hanks today", `"Order shipped to Tom Hanks today"`, fixpoint.GradeNone, ""},
		{"short string one letter off", "Contact: Smith", `"Smyth"`, fixpoint.GradeNone, ""},
		{"short string one letter missing", "Vendor: Acme Corp", `"Acme Crp"`, fixpoint.GradeNone, ""},
		{"a digit in a long string", "Invoice number 2302 was paid", `"Invoice number 2301 was paid"`, fixpoint.GradeNone, ""},
		{"digit separators count", "ratio 15 overall", `"1.5"`, fixpoint.GradeNone, ""},
		{"a Han character", "株式会社山本製作所東京支店", `"株式会社山田製作所東京支店"`, fixpoint.GradeNone, ""},
		{"a letter that is a word", "Jonathan Livingston Smith", `"Jonathan Livingston A Smith"`, fixpoint.GradeNone, ""},
		{"not the start of a word", "Contact: XJonathan Livingstone", `"Jonathan Livingston"`, fixpoint.GradeNone, ""},
		{"a vowel replaced", "Contact: Jonathan Livingstone", `"Jonathon Livingstone"`, fixpoint.GradeFuzzy, "Jonathan Livingstone"},
		{"two edits", "Contact: Jonathan Livingstone", `"Jonathon Livingstane"`, fixpoint.GradeNone, ""},
	})
}

// TestAlignConcurrently: one source serves many Aligns at once (run with
// -race), the first fuzzy value building the skeleton while others read.
func TestAlignConcurrently(t *testing.T) {
	t.Parallel()
	s := New("Contact: Jonathan Livingstone-Smith, Acme Corp, 1.249,99 €, 3 mars 2027")
	v := decode(t, `{"a":"Jonathan Livingston-Smith","b":"ACME CORP","c":1249.99,"d":"2027-03-03","e":"Globex Intergalactic"}`)
	want := New(s.Text()).Align(v, nil)
	results := make(chan Result, 8)
	for range cap(results) {
		go func() { results <- s.Align(v, nil) }()
	}
	for range cap(results) {
		if got := <-results; !slices.Equal(got.Leaves, want.Leaves) || got.Summary != want.Summary {
			t.Fatalf("concurrent Align = %+v, want %+v", got, want)
		}
	}
	if want.Summary != (Summary{Normalized: 3, Fuzzy: 1, None: 1}) {
		t.Fatalf("summary %+v", want.Summary)
	}
}
