package config

// SameAddress reports whether two host:port addresses name one SQL Server
// endpoint, as the loader compares them (sameAddress): a recover refuses
// to restore over its source reached under a second name.
func SameAddress(a, b string) bool { return sameAddress(a, b) }
