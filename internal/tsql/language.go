package tsql

// SetLanguageEnglish makes a session's messages English whatever the login's default language, and SessionLanguage
// reads it back (https://learn.microsoft.com/en-us/sql/t-sql/statements/set-language-transact-sql).
const SetLanguageEnglish, SessionLanguage = "SET LANGUAGE us_english", "SELECT @@LANGUAGE"
