package sim

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// docLang is how one language writes a simulated document: the phrases
// that carry its planted fields (and the patterns that read them back),
// its names, countries and jurisdictions, and the filler between them.
// A filler sentence never matches a planted phrase's pattern.
type docLang struct {
	code  string
	title string
	// preamble takes the provider, the customer and the effective date;
	// amount the amount and the currency as written; notice the days;
	// law the jurisdiction.
	preamble, amount, notice, law string
	listIntro                     string
	// bullet takes a name, a country and a percent as written.
	bullet    string
	tableHead string
	heading   func(n int, title string) string
	// sep joins the sentences of a paragraph.
	sep string
	// Patterns reading the planted phrases back, each value a submatch;
	// reBullet and reRow match one whole line.
	reParties, reEffective, reAmount, reNotice, reLaw, reBullet, reRow *regexp.Regexp
	// firstParts, sectors and suffixes make company names.
	firstParts, sectors, suffixes []string
	// nameJoin joins a name's parts (a space, or nothing).
	nameJoin  string
	countries []string
	laws      []string
	// inventedLaws and inventedNames are what a model invents for a field
	// its text does not hold: none of them occurs in a document.
	inventedLaws, inventedNames []string
	headings                    []string
	sentences                   []string
	nouns                       []string
	// date writes a date, variant drawn by seed; decimalComma sets how
	// numbers are written; group separates thousands.
	date         func(d time.Time, variant int) string
	parseDate    func(s string) (string, bool)
	decimalComma bool
	group        string
	currency     func(code string) string
	parseCur     func(s string) (string, bool)
}

// docLangs are the languages of the simulated documents, by code.
var docLangs = map[string]*docLang{}

// DocumentLangs lists the languages the document generator writes: en,
// de, fr and ja (Japanese, written without spaces between words).
func DocumentLangs() []string { return []string{"en", "de", "fr", "ja"} }

var enMonths = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
var deMonths = []string{"Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober", "November", "Dezember"}
var frMonths = []string{"janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre", "décembre"}

// monthDate parses "day month year" or "month day, year" with the given
// month names into an ISO date.
func monthDate(s string, months []string) (string, bool) {
	s = strings.NewReplacer("1er ", "1 ", ",", "", ". ", " ").Replace(s)
	f := strings.Fields(s)
	if len(f) != 3 {
		return "", false
	}
	day, month, year := f[0], f[1], f[2]
	if _, err := strconv.Atoi(day); err != nil {
		day, month = f[1], f[0]
	}
	for i, m := range months {
		if m == month {
			d, err1 := strconv.Atoi(day)
			y, err2 := strconv.Atoi(year)
			if err1 != nil || err2 != nil {
				return "", false
			}
			t := time.Date(y, time.Month(i+1), d, 0, 0, 0, 0, time.UTC)
			if t.Day() != d {
				return "", false
			}
			return t.Format(time.DateOnly), true
		}
	}
	return "", false
}

func codeCurrency(code string) string { return code }

func parseCodeCurrency(s string) (string, bool) {
	return s, slices.Contains(docCurrencies, s)
}

// docCurrencies are the currencies of the documents' amounts.
var docCurrencies = []string{"EUR", "USD", "GBP", "CHF", "JPY"}

var jaCurrencies = map[string]string{"EUR": "ユーロ", "USD": "米ドル", "GBP": "英ポンド", "CHF": "スイスフラン", "JPY": "円"}

func init() {
	for _, l := range []*docLang{englishDoc(), germanDoc(), frenchDoc(), japaneseDoc()} {
		docLangs[l.code] = l
	}
}

// The number and percent patterns every language's readers share, and
// the table row of the subsidiaries' tables, the same in every language.
const (
	docNum = `([0-9][0-9.,\x{202f}]*[0-9])`
	docPct = `([0-9]+(?:[.,][0-9])?)`
)

var docRow = regexp.MustCompile(`^\| ([^|\n]+?) \| ([^|\n]+?) \| ` + docPct + ` \|$`)

// englishDoc is the English document language.
func englishDoc() *docLang {
	return &docLang{
		code:        "en",
		title:       "# Group Framework Agreement",
		preamble:    `This Group Framework Agreement (the "Agreement") is made between %s (the "Provider") and %s (the "Customer"). It takes effect on %s (the "Effective Date").`,
		amount:      "The total fees payable under this Agreement amount to %[2]s %[1]s.",
		notice:      "Either party may terminate this Agreement by giving not less than %d days' written notice to the other party.",
		law:         "This Agreement shall be governed by the laws of %s.",
		listIntro:   "The following Group companies take part in the services described in this section:",
		bullet:      "- %s, registered in %s, ownership %s%%",
		tableHead:   "| Company | Country | Ownership (%) |",
		heading:     func(n int, t string) string { return "## " + strconv.Itoa(n) + ". " + t },
		sep:         " ",
		reParties:   regexp.MustCompile(`made between ([^()\n]+?) \(the "Provider"\) and ([^()\n]+?) \(the "Customer"\)`),
		reEffective: regexp.MustCompile(`It takes effect on ([0-9A-Za-z, ]+?) \(the "Effective Date"\)`),
		reAmount:    regexp.MustCompile(`under this Agreement amount to ([A-Z]{3}) ` + docNum + `\.`),
		reNotice:    regexp.MustCompile(`not less than ([0-9]+) days' written notice`),
		reLaw:       regexp.MustCompile(`governed by the laws of ([^.\n]+)\.`),
		reBullet:    regexp.MustCompile(`^- ([^\n]+?), registered in ([^\n]+?), ownership ` + docPct + `%$`),
		reRow:       docRow,
		firstParts: []string{"Northwind", "Bluewater", "Harcourt", "Kestrel", "Ashford", "Redfield", "Silverline", "Oakridge",
			"Brightmoor", "Caldwell", "Thornbury", "Westgate", "Fairhaven", "Stonebridge", "Larkspur", "Merriton"},
		sectors: []string{"Logistics", "Holdings", "Systems", "Energy", "Foods", "Capital", "Analytics", "Textiles",
			"Marine", "Pharma", "Software", "Minerals", "Robotics", "Ceramics"},
		suffixes:      []string{"Ltd", "Limited", "plc", "Inc.", "LLC", "Pty Ltd", "B.V.", "S.A."},
		nameJoin:      " ",
		countries:     []string{"Germany", "France", "United Kingdom", "Netherlands", "Spain", "Italy", "Poland", "Sweden", "Ireland", "United States", "Canada", "Brazil", "Mexico", "Japan", "Singapore", "India", "Australia", "South Africa", "Switzerland", "Austria", "Belgium", "Denmark", "Norway", "Czech Republic"},
		laws:          []string{"England and Wales", "the State of New York", "Scotland", "the State of Delaware", "Northern Ireland"},
		inventedLaws:  []string{"the State of California", "the Commonwealth of Massachusetts", "the Province of Ontario"},
		inventedNames: []string{"Globex Corporation", "Initech Ltd", "Vandelay Industries", "Hooli Group", "Soylent Partners"},
		headings: []string{"Definitions", "Scope of Services", "Service Levels", "Governance", "Personnel", "Data Protection", "Security",
			"Audit", "Intellectual Property", "Confidentiality", "Subcontracting", "Change Control", "Invoicing", "Liability",
			"Insurance", "Business Continuity", "Exit Management", "Dispute Resolution", "Notices", "Miscellaneous"},
		sentences: []string{
			"{A} shall be reviewed by the parties at least once per quarter.",
			"Each party remains responsible for {a} within its own organisation.",
			"Changes to {a} require the prior written consent of both parties.",
			"{A} is described in more detail in the relevant annex.",
			"Where {a} is affected, the Customer will be informed without undue delay.",
			"Nothing in this section limits {a} of either party.",
			"The parties will cooperate in good faith to maintain {a}.",
			"{A} must be documented and made available on request.",
			"The Provider shall ensure that {a} complies with applicable standards.",
			"Reports on {a} are delivered in electronic form.",
			"{A} and {b} are to be read together.",
			"Costs arising from {a} are borne by the party that caused them.",
			"The steering committee may adjust {a} where {b} so requires.",
			"Any dispute about {a} is first escalated under the governance procedure.",
		},
		nouns: []string{"the service description", "the security concept", "the escalation procedure", "the change procedure",
			"the audit programme", "the data protection measures", "the reporting process", "the acceptance criteria",
			"the quality plan", "the transition plan", "the exit plan", "the invoicing process", "the insurance cover",
			"the project governance", "the subcontracting arrangement", "the capacity plan", "the continuity plan"},
		date: func(d time.Time, v int) string {
			if v%2 == 0 {
				return strconv.Itoa(d.Day()) + " " + enMonths[d.Month()-1] + " " + strconv.Itoa(d.Year())
			}
			return enMonths[d.Month()-1] + " " + strconv.Itoa(d.Day()) + ", " + strconv.Itoa(d.Year())
		},
		parseDate: func(s string) (string, bool) { return monthDate(s, enMonths) },
		group:     ",",
		currency:  codeCurrency,
		parseCur:  parseCodeCurrency,
	}
}

// germanDoc is the German document language.
func germanDoc() *docLang {
	return &docLang{
		code:        "de",
		title:       "# Konzernrahmenvertrag",
		preamble:    "Dieser Konzernrahmenvertrag (der „Vertrag“) wird zwischen der %s (der „Anbieter“) und der %s (der „Kunde“) geschlossen. Er tritt am %s in Kraft.",
		amount:      "Die Gesamtvergütung nach diesem Vertrag beträgt %s %s.",
		notice:      "Jede Partei kann diesen Vertrag mit einer Frist von %d Tagen schriftlich kündigen.",
		law:         "Auf diesen Vertrag findet das Recht von %s Anwendung.",
		listIntro:   "An den in diesem Abschnitt beschriebenen Leistungen sind folgende Konzerngesellschaften beteiligt:",
		bullet:      "- %s, Sitz: %s, Beteiligung: %s %%",
		tableHead:   "| Gesellschaft | Land | Anteil (%) |",
		heading:     func(n int, t string) string { return "## § " + strconv.Itoa(n) + " " + t },
		sep:         " ",
		reParties:   regexp.MustCompile(`wird zwischen der ([^()\n]+?) \(der „Anbieter“\) und der ([^()\n]+?) \(der „Kunde“\) geschlossen`),
		reEffective: regexp.MustCompile(`Er tritt am ([0-9]{1,2}\. [A-Za-zä]+ [0-9]{4}) in Kraft\.`),
		reAmount:    regexp.MustCompile(`nach diesem Vertrag beträgt ` + docNum + ` ([A-Z]{3})\.`),
		reNotice:    regexp.MustCompile(`mit einer Frist von ([0-9]+) Tagen schriftlich kündigen`),
		reLaw:       regexp.MustCompile(`findet das Recht von ([^.\n]+) Anwendung\.`),
		reBullet:    regexp.MustCompile(`^- ([^\n]+?), Sitz: ([^\n]+?), Beteiligung: ` + docPct + ` %$`),
		reRow:       docRow,
		firstParts: []string{"Bergmann", "Hofstetter", "Lindner", "Brandauer", "Krüger", "Wendt", "Falkenberg", "Steinbach",
			"Ostwald", "Rheinland", "Alpenblick", "Nordstern", "Tannenhof", "Weißenfels", "Eichwald", "Sonnberg"},
		sectors: []string{"Logistik", "Holding", "Systeme", "Energie", "Lebensmittel", "Kapital", "Analytik", "Textil",
			"Schifffahrt", "Pharma", "Software", "Rohstoffe", "Robotik", "Keramik"},
		suffixes:      []string{"GmbH", "AG", "KG", "GmbH & Co. KG", "SE", "Ges.m.b.H.", "B.V.", "S.A."},
		nameJoin:      " ",
		countries:     []string{"Deutschland", "Frankreich", "Vereinigtes Königreich", "Niederlande", "Spanien", "Italien", "Polen", "Schweden", "Irland", "Vereinigte Staaten", "Kanada", "Brasilien", "Mexiko", "Japan", "Singapur", "Indien", "Australien", "Südafrika", "Schweiz", "Österreich", "Belgien", "Dänemark", "Norwegen", "Tschechien"},
		laws:          []string{"Deutschland", "Österreich", "Liechtenstein", "England und Wales"},
		inventedLaws:  []string{"Luxemburg", "Monaco", "Malta"},
		inventedNames: []string{"Musterfirma Handels GmbH", "Beispielwerke AG", "Phantasia Logistik GmbH"},
		headings: []string{"Begriffsbestimmungen", "Leistungsumfang", "Service Levels", "Steuerung", "Personal", "Datenschutz",
			"Informationssicherheit", "Audit", "Geistiges Eigentum", "Vertraulichkeit", "Unterauftragnehmer", "Änderungsverfahren",
			"Rechnungsstellung", "Haftung", "Versicherung", "Notfallvorsorge", "Beendigungsunterstützung", "Streitbeilegung",
			"Mitteilungen", "Schlussbestimmungen"},
		sentences: []string{
			"{A} wird mindestens einmal im Quartal gemeinsam überprüft.",
			"Jede Partei trägt die Kosten, die ihr durch {a} entstehen.",
			"{A} ist in der jeweiligen Anlage näher beschrieben.",
			"Die Parteien arbeiten vertrauensvoll zusammen, um {a} aufrechtzuerhalten.",
			"Der Anbieter stellt sicher, dass {a} den anerkannten Standards entspricht.",
			"Berichte über {a} werden in elektronischer Form übermittelt.",
			"{A} und {b} sind im Zusammenhang auszulegen.",
			"Soweit {a} betroffen ist, wird der Kunde unverzüglich informiert.",
			"Nichts in diesem Abschnitt schränkt {a} ein.",
			"{A} ist zu dokumentieren und auf Anforderung vorzulegen.",
			"Für {a} gelten ergänzend die Bestimmungen der Anlagen.",
			"Der Lenkungsausschuss kann {a} anpassen, wenn {b} dies erfordert.",
		},
		nouns: []string{"die Leistungsbeschreibung", "das Sicherheitskonzept", "die Eskalationsregelung", "das Änderungsverfahren",
			"das Auditprogramm", "die Datenschutzorganisation", "das Berichtswesen", "die Abnahmeregelung", "das Qualitätsmanagement",
			"die Übergangsplanung", "das Ausstiegskonzept", "die Rechnungsstellung", "die Versicherungsdeckung", "das Projektmanagement",
			"die Unterbeauftragung", "die Kapazitätsplanung", "das Notfallkonzept"},
		date: func(d time.Time, _ int) string {
			return strconv.Itoa(d.Day()) + ". " + deMonths[d.Month()-1] + " " + strconv.Itoa(d.Year())
		},
		parseDate:    func(s string) (string, bool) { return monthDate(s, deMonths) },
		decimalComma: true,
		group:        ".",
		currency:     codeCurrency,
		parseCur:     parseCodeCurrency,
	}
}

// frenchDoc is the French document language.
func frenchDoc() *docLang {
	return &docLang{
		code:        "fr",
		title:       "# Contrat-cadre de groupe",
		preamble:    "Le présent contrat-cadre (le « Contrat ») est conclu entre %s (le « Prestataire ») et %s (le « Client »). Il entre en vigueur le %s.",
		amount:      "Le montant total dû au titre du Contrat s'élève à %s %s.",
		notice:      "Chaque partie peut résilier le Contrat moyennant un préavis écrit de %d jours.",
		law:         "Le Contrat est soumis au droit %s.",
		listIntro:   "Les sociétés du Groupe suivantes participent aux services décrits au présent article\u00a0:",
		bullet:      "- %s, siège\u00a0: %s, participation\u00a0: %s\u00a0%%",
		tableHead:   "| Société | Pays | Participation (%) |",
		heading:     func(n int, t string) string { return "## Article " + strconv.Itoa(n) + " – " + t },
		sep:         " ",
		reParties:   regexp.MustCompile(`est conclu entre ([^()\n]+?) \(le « Prestataire »\) et ([^()\n]+?) \(le « Client »\)`),
		reEffective: regexp.MustCompile(`Il entre en vigueur le ([0-9]{1,2}(?:er)? [a-zéû]+ [0-9]{4})\.`),
		reAmount:    regexp.MustCompile(`au titre du Contrat s'élève à ` + docNum + ` ([A-Z]{3})\.`),
		reNotice:    regexp.MustCompile(`moyennant un préavis écrit de ([0-9]+) jours`),
		reLaw:       regexp.MustCompile(`est soumis au droit ([^.\n]+)\.`),
		reBullet:    regexp.MustCompile(`^- ([^\n]+?), siège\x{a0}: ([^\n]+?), participation\x{a0}: ` + docPct + `\x{a0}%$`),
		reRow:       docRow,
		firstParts: []string{"Durand", "Lefèvre", "Moreau", "Garnier", "Rousseau", "Chevalier", "Beaumont", "Valmont",
			"Aubert", "Delacroix", "Marchand", "Fontaine", "Lambert", "Bonnefoy", "Mercier", "Vasseur"},
		sectors: []string{"Logistique", "Participations", "Systèmes", "Énergie", "Alimentaire", "Capital", "Analytique", "Textiles",
			"Maritime", "Pharma", "Logiciels", "Minéraux", "Robotique", "Céramiques"},
		suffixes:      []string{"SAS", "SA", "SARL", "SNC", "SCA", "Ltd", "GmbH", "B.V."},
		nameJoin:      " ",
		countries:     []string{"Allemagne", "France", "Royaume-Uni", "Pays-Bas", "Espagne", "Italie", "Pologne", "Suède", "Irlande", "États-Unis", "Canada", "Brésil", "Mexique", "Japon", "Singapour", "Inde", "Australie", "Afrique du Sud", "Suisse", "Autriche", "Belgique", "Danemark", "Norvège", "Tchéquie"},
		laws:          []string{"français", "belge", "suisse", "luxembourgeois", "monégasque"},
		inventedLaws:  []string{"italien", "espagnol", "portugais"},
		inventedNames: []string{"Dupont Négoce SA", "Société Imaginaire SAS", "Fictif Industries SARL"},
		headings: []string{"Définitions", "Périmètre des services", "Niveaux de service", "Gouvernance", "Personnel",
			"Protection des données", "Sécurité", "Audit", "Propriété intellectuelle", "Confidentialité", "Sous-traitance",
			"Gestion des modifications", "Facturation", "Responsabilité", "Assurance", "Continuité d'activité", "Réversibilité",
			"Règlement des différends", "Notifications", "Dispositions diverses"},
		sentences: []string{
			"{A} fait l'objet d'une revue au moins une fois par trimestre.",
			"{A} figure plus en détail dans l'annexe concernée.",
			"Chaque partie supporte les frais qu'elle engage pour {a}.",
			"Les parties coopèrent de bonne foi pour maintenir {a}.",
			"Le Prestataire veille à ce que {a} respecte les normes applicables.",
			"Les rapports concernant {a} sont transmis sous forme électronique.",
			"{A} et {b} s'interprètent conjointement.",
			"Lorsque {a} est en cause, le Client en est informé sans délai.",
			"Aucune stipulation du présent article ne limite {a}.",
			"Toute modification touchant {a} requiert l'accord écrit préalable des parties.",
			"Les annexes précisent {a}.",
			"Le comité de pilotage peut adapter {a} lorsque {b} l'exige.",
		},
		nouns: []string{"le niveau de service", "la politique de sécurité", "la procédure d'escalade", "la procédure de modification",
			"le programme d'audit", "la protection des données", "le dispositif de reporting", "la procédure de recette",
			"le plan qualité", "le plan de transition", "le plan de réversibilité", "la facturation", "la couverture d'assurance",
			"la gouvernance du projet", "la sous-traitance", "le plan de capacité", "le plan de continuité"},
		date: func(d time.Time, _ int) string {
			day := strconv.Itoa(d.Day())
			if d.Day() == 1 {
				day = "1er"
			}
			return day + " " + frMonths[d.Month()-1] + " " + strconv.Itoa(d.Year())
		},
		parseDate:    func(s string) (string, bool) { return monthDate(s, frMonths) },
		decimalComma: true,
		group:        "\u202f",
		currency:     codeCurrency,
		parseCur:     parseCodeCurrency,
	}
}

// japaneseDoc is the Japanese document language: no spaces between words.
func japaneseDoc() *docLang {
	return &docLang{
		code:        "ja",
		title:       "# グループ基本契約書",
		preamble:    "本契約は、%s（以下「提供者」という。）と%s（以下「顧客」という。）との間で締結される。本契約は%sから効力を生じる。",
		amount:      "本契約に基づく報酬の総額は%s%sとする。",
		notice:      "各当事者は、%d日前までに書面で通知することにより、本契約を解除することができる。",
		law:         "本契約の準拠法は%sとする。",
		listIntro:   "本条に定める業務には、次のグループ会社が参加する。",
		bullet:      "・%s（所在国：%s、議決権比率：%s%%）",
		tableHead:   "| 会社名 | 所在国 | 議決権比率（%） |",
		heading:     func(n int, t string) string { return "## 第" + strconv.Itoa(n) + "条（" + t + "）" },
		sep:         "",
		reParties:   regexp.MustCompile(`本契約は、([^、。（）\n]+?)（以下「提供者」という。）と([^、。（）\n]+?)（以下「顧客」という。）との間で締結される。`),
		reEffective: regexp.MustCompile(`本契約は([0-9]+年[0-9]+月[0-9]+日)から効力を生じる。`),
		reAmount:    regexp.MustCompile(`本契約に基づく報酬の総額は` + docNum + `(ユーロ|米ドル|英ポンド|スイスフラン|円)とする。`),
		reNotice:    regexp.MustCompile(`([0-9]+)日前までに書面で通知することにより`),
		reLaw:       regexp.MustCompile(`本契約の準拠法は([^。\n]+)とする。`),
		reBullet:    regexp.MustCompile(`^・([^\n]+?)（所在国：([^\n]+?)、議決権比率：` + docPct + `%）$`),
		reRow:       docRow,
		firstParts: []string{"北陽", "東和", "大成", "日本橋", "青葉", "富士見", "光洋", "三和",
			"中央", "朝日", "白鷺", "桜井", "瑞穂", "若葉", "丸之内", "高砂"},
		sectors:       []string{"物流", "ホールディングス", "システムズ", "エナジー", "食品", "キャピタル", "分析", "繊維", "海運", "製薬", "ソフトウェア", "鉱業", "ロボティクス", "窯業"},
		suffixes:      []string{"株式会社", "合同会社", "有限会社", "Pte. Ltd.", "GmbH", "Inc.", "B.V.", "Ltd."},
		nameJoin:      "",
		countries:     []string{"ドイツ", "フランス", "英国", "オランダ", "スペイン", "イタリア", "ポーランド", "スウェーデン", "アイルランド", "米国", "カナダ", "ブラジル", "メキシコ", "日本", "シンガポール", "インド", "オーストラリア", "南アフリカ", "スイス", "オーストリア", "ベルギー", "デンマーク", "ノルウェー", "チェコ"},
		laws:          []string{"日本法", "シンガポール法", "英国法", "香港法", "ニューヨーク州法"},
		inventedLaws:  []string{"韓国法", "カリフォルニア州法", "ルクセンブルク法"},
		inventedNames: []string{"架空商事株式会社", "見本工業株式会社", "仮想物産株式会社"},
		headings: []string{"定義", "業務の範囲", "サービスレベル", "運営体制", "人員", "個人情報の保護", "情報セキュリティ", "監査",
			"知的財産権", "秘密保持", "再委託", "変更管理", "請求", "責任の制限", "保険", "事業継続", "契約終了時の措置", "紛争解決", "通知", "雑則"},
		sentences: []string{
			"{a}は、少なくとも四半期に一度、両当事者により見直されるものとする。",
			"各当事者は、自らの組織における{a}について責任を負う。",
			"{a}の変更には、両当事者の事前の書面による承諾を要する。",
			"{a}の詳細は、関連する別紙に定める。",
			"{a}に影響がある場合、顧客に遅滞なく知らせるものとする。",
			"本条のいかなる規定も、各当事者の{a}を制限するものではない。",
			"両当事者は、{a}を維持するため誠実に協力する。",
			"{a}は文書化し、求めに応じて提示するものとする。",
			"提供者は、{a}が適用される基準に適合することを確保する。",
			"{a}に関する報告は電子的方法により提出する。",
			"{a}及び{b}は、一体として解釈される。",
			"{a}に起因する費用は、その原因を生じさせた当事者が負担する。",
			"運営委員会は、{b}のため必要がある場合、{a}を調整することができる。",
		},
		nouns: []string{"業務仕様", "セキュリティ方針", "エスカレーション手順", "変更手続", "監査計画", "個人情報保護措置", "報告体制",
			"検収基準", "品質計画", "移行計画", "終了計画", "請求手続", "保険の補償", "プロジェクト管理", "再委託の管理", "能力計画", "事業継続計画"},
		date: func(d time.Time, _ int) string {
			return strconv.Itoa(d.Year()) + "年" + strconv.Itoa(int(d.Month())) + "月" + strconv.Itoa(d.Day()) + "日"
		},
		parseDate: func(s string) (string, bool) {
			var y, m, d int
			rest := s
			for _, p := range []struct {
				sep string
				out *int
			}{{"年", &y}, {"月", &m}, {"日", &d}} {
				head, tail, ok := strings.Cut(rest, p.sep)
				n, err := strconv.Atoi(head)
				if !ok || err != nil {
					return "", false
				}
				*p.out, rest = n, tail
			}
			t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
			if rest != "" || t.Day() != d {
				return "", false
			}
			return t.Format(time.DateOnly), true
		},
		group:    ",",
		currency: func(code string) string { return jaCurrencies[code] },
		parseCur: func(s string) (string, bool) {
			for code, name := range jaCurrencies {
				if name == s {
					return code, true
				}
			}
			return "", false
		},
	}
}
