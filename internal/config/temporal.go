package config

// Temporal is how the worker and the starter reach a Temporal cluster.
// In the dev stack (`make demo`, devworker) none of it is needed: the embedded server is used.
type Temporal struct {
	Address   string `yaml:"address"`     // host:port of the frontend; default 127.0.0.1:7233
	Namespace string `yaml:"namespace"`   // default "default"
	TaskQueue string `yaml:"task_queue"`  // default "backupcycle"
	TLS       *TLS   `yaml:"tls"`         // nil: plaintext
	APIKeyEnv string `yaml:"api_key_env"` // name of the env var holding an API key (never the key itself)
}

// TLS configures TLS / mTLS to the Temporal frontend. Files are paths.
type TLS struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"` // with key_file: mTLS client certificate
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}
