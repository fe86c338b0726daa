package main

import (
	"context"
	"flag"

	"github.com/backupcycle/backupcycle/internal/preflight"
	"github.com/backupcycle/backupcycle/starter/client"
)

// preflightCmd connects to every configured SQL instance and backup server
// with the configured credentials and reports each permission the cycle
// needs; exit 1 when one is missing.
func preflightCmd(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
	o := preflight.Options{CompressionFactor: client.DefaultCompressionFactor}
	fs.StringVar(&o.Database, "database", "", "check only this database (its name under databases:), its instances and backup servers; default: everything configured")
	fs.StringVar(&o.Instance, "instance", "", "with --database: the source instance, when the name is configured on several")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.Instance != "" && o.Database == "" {
		return usageError{msg: "--instance needs --database: name the database to check on it"}
	}
	cfg, err := e.requireConfig(fs)
	if err != nil {
		return err
	}
	o.Config = cfg
	r, err := preflight.Run(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		err = r.WriteJSON(e.stdout)
	} else {
		err = r.WriteText(e.stdout)
	}
	if err != nil {
		return err
	}
	return r.Err()
}
