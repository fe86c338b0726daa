package sqlsim

import (
	"regexp"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// Session languages. SQL Server sends sys.messages text in the session's
// language: the login's default language, or the one SET LANGUAGE chose
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/set-language-transact-sql);
// numbers, states and classes never change. A product that reads English
// text ("percent processed", "successfully processed") breaks on such a
// login, so the emulator translates the messages the product meets. Every
// INFO and ERROR token of a session passes through session.Localize (the
// tds.Localizer hook); login errors through localizeErrors.

// language is a session language as @@LANGUAGE reports it.
type language struct {
	name string
	// langid is sys.syslanguages.langid (@@LANGID).
	langid int64
	key    string // index into the translations
}

var (
	usEnglish = language{name: "us_english", langid: 0, key: "en"}
	deutsch   = language{name: "Deutsch", langid: 1, key: "de"}
	francais  = language{name: "Français", langid: 2, key: "fr"}
)

// languageByName finds a language by its name or alias (as in
// sys.syslanguages: us_english/English, Deutsch/German, Français/French);
// "" is us_english, the server default.
func languageByName(name string) (language, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "us_english", "english":
		return usEnglish, true
	case "deutsch", "german":
		return deutsch, true
	case "français", "francais", "french":
		return francais, true
	}
	return language{}, false
}

// translation rewrites one message's English text; the pattern captures
// its arguments, the templates put them back (${1}, ${2}, ...).
type translation struct {
	en     *regexp.Regexp
	de, fr string
}

// The texts of sys.messages for these numbers (approximate where the
// localized SQL Server text is not at hand, but never containing the
// English phrases a parser would look for).
var translations = map[int32][]translation{
	3211: {{regexp.MustCompile(`^(\d+) percent processed\.$`),
		"${1} Prozent verarbeitet.", "${1} pour cent traités."}},
	3014: {{regexp.MustCompile(`^(.+?) successfully processed (\d+) pages in ([\d.,]+) seconds \(([\d.,]+) MB/sec\)\.$`),
		"${1} hat ${2} Seiten in ${3} Sekunden erfolgreich verarbeitet (${4} MB/s).",
		"${1} a traité avec succès ${2} pages en ${3} secondes (${4} Mo/s)."}},
	4035: {{regexp.MustCompile(`^Processed (\d+) pages for database '(.*)', file '(.*)' on file (\d+)\.$`),
		"Für die Datenbank '${2}', Datei '${3}' für Datei ${4} wurden ${1} Seiten verarbeitet.",
		"${1} pages traitées pour la base de données '${2}', fichier '${3}' sur le fichier ${4}."}},
	3013: {{regexp.MustCompile(`^(.+) is terminating abnormally\.$`),
		"${1} wird fehlerbedingt beendet.", "${1} se termine anormalement."}},
	3201: {{regexp.MustCompile(`^Cannot open backup device '(.*)'\. Operating system error (.*)\.$`),
		"Das Sicherungsmedium '${1}' kann nicht geöffnet werden. Betriebssystemfehler ${2}.",
		"Impossible d'ouvrir l'unité de sauvegarde '${1}'. Erreur du système d'exploitation ${2}."}},
	3202: {{regexp.MustCompile(`^Write on "(.*)" failed: (.*)$`),
		"Fehler beim Schreiben auf \"${1}\": ${2}", "Échec de l'écriture sur \"${1}\" : ${2}"}},
	3203: {
		{regexp.MustCompile(`^Read on "(.*)" failed: (.*)$`),
			"Fehler beim Lesen von \"${1}\": ${2}", "Échec de la lecture sur \"${1}\" : ${2}"},
		{regexp.MustCompile(`^Write on "(.*)" failed: (.*)$`),
			"Fehler beim Schreiben auf \"${1}\": ${2}", "Échec de l'écriture sur \"${1}\" : ${2}"}},
	18456: {{regexp.MustCompile(`^Login failed for user '(.*)'\.$`),
		"Fehler bei der Anmeldung für den Benutzer '${1}'.", "Échec de la connexion de l'utilisateur '${1}'."}},
	4060: {{regexp.MustCompile(`^Cannot open database "(.*)" requested by the login\. The login failed\.$`),
		"Die von der Anmeldung angeforderte Datenbank \"${1}\" kann nicht geöffnet werden. Fehler bei der Anmeldung.",
		"Impossible d'ouvrir la base de données \"${1}\" demandée par la connexion. La connexion a échoué."}},
	4064: {{regexp.MustCompile(`^Cannot open user default database\. Login failed\.$`),
		"Die Standarddatenbank des Benutzers kann nicht geöffnet werden. Fehler bei der Anmeldung.",
		"Impossible d'ouvrir la base de données par défaut de l'utilisateur. La connexion a échoué."}},
	5701: {{regexp.MustCompile(`^Changed database context to '(.*)'\.$`),
		"Der Datenbankkontext wurde auf '${1}' geändert.", "Contexte de base de données changé en '${1}'."}},
	5703: {{regexp.MustCompile(`^Changed language setting to (.*)\.$`),
		"Die Spracheinstellung wurde auf ${1} geändert.", "Le paramètre de langue est passé à ${1}."}},
}

// osErrors translates the Windows error texts SQL Server quotes after the
// number ("53(The network path was not found.)"); Windows answers in the
// server's language too.
var osErrors = map[string][2]string{
	"The system cannot find the file specified.":         {"Das System kann die angegebene Datei nicht finden.", "Le fichier spécifié est introuvable."},
	"The system cannot find the path specified.":         {"Das System kann den angegebenen Pfad nicht finden.", "Le chemin d'accès spécifié est introuvable."},
	"The network path was not found.":                    {"Der Netzwerkpfad wurde nicht gefunden.", "Le chemin réseau n'a pas été trouvé."},
	"There is not enough space on the disk.":             {"Auf dem Datenträger ist nicht genügend Speicherplatz vorhanden.", "Espace insuffisant sur le disque."},
	"Access is denied.":                                  {"Zugriff verweigert", "Accès refusé."},
	"The specified network name is no longer available.": {"Der angegebene Netzwerkname ist nicht mehr verfügbar.", "Le nom réseau spécifié n'est plus disponible."},
	"The network name cannot be found.":                  {"Der Netzwerkname wurde nicht gefunden.", "Nom de réseau introuvable."},
	"An unexpected network error occurred.":              {"Unerwarteter Netzwerkfehler.", "Une erreur réseau inattendue s'est produite."},
}

var osErrRe = regexp.MustCompile(`(\d+)\(([^()]*)\)`)

// localize returns e in language l: the same error when there is nothing
// to translate.
func localize(l language, e *tds.Error) *tds.Error {
	if l.key == "en" || e == nil {
		return e
	}
	for _, t := range translations[e.Number] {
		if !t.en.MatchString(e.Message) {
			continue
		}
		tmpl := t.de
		if l.key == "fr" {
			tmpl = t.fr
		}
		c := *e
		c.Message = t.en.ReplaceAllString(e.Message, tmpl)
		c.Message = osErrRe.ReplaceAllStringFunc(c.Message, func(m string) string {
			sub := osErrRe.FindStringSubmatch(m)
			if tr, ok := osErrors[sub[2]]; ok {
				i := 0
				if l.key == "fr" {
					i = 1
				}
				return sub[1] + "(" + tr[i] + ")"
			}
			return m
		})
		return &c
	}
	return e
}

// localizeErrors translates the errors of a failed login.
func localizeErrors(l language, es tds.Errors) tds.Errors {
	out := make(tds.Errors, len(es))
	for i, e := range es {
		out[i] = localize(l, e)
	}
	return out
}

// Localize implements tds.Localizer.
func (s *session) Localize(e *tds.Error) *tds.Error { return localize(s.language(), e) }

// Language implements tds.Localizer.
func (s *session) Language() string { return s.language().name }

func (s *session) language() language {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lang.name == "" {
		return usEnglish
	}
	return s.lang
}

func (s *session) setLanguage(l language) {
	s.mu.Lock()
	s.lang = l
	s.mu.Unlock()
}

// setLanguageStmt runs SET LANGUAGE name: 2154 for an unknown language
// (https://learn.microsoft.com/en-us/sql/t-sql/statements/set-language-transact-sql);
// the tds layer sends the ENVCHANGE and the client sees 5703.
func (x *execCtx) setLanguage(e expr) error {
	v, err := (&env{x: x}).eval(e)
	if err != nil {
		return err
	}
	l, ok := languageByName(toString(v))
	if !ok || toString(v) == "" {
		return sqlErr(2154, 16, "'%s' is not an official language name.", toString(v))
	}
	x.s.setLanguage(l)
	return x.w.Info(5703, 0, "Changed language setting to "+l.name+".")
}
