package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/internal/preflight"
	"github.com/backupcycle/backupcycle/starter/client"
)

// preflightCommand connects to every configured SQL instance and backup
// server with the configured credentials and reports each permission the
// cycle needs; exit 1 when one is missing.
func preflightCommand(e *env) *cobra.Command {
	o := preflight.Options{CompressionFactor: client.DefaultCompressionFactor}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "check every permission the cycle needs on the configured instances and backup servers; print the GRANTs that are missing",
		Args:  noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if o.Instance != "" && o.Database == "" {
				return usageError{msg: "--instance needs --database: name the database to check on it"}
			}
			cfg, err := e.requireConfig(cmd)
			if err != nil {
				return err
			}
			o.Config = cfg
			r, err := preflight.Run(ctx, o)
			if err != nil {
				return err
			}
			if asJSON {
				err = r.WriteJSON(e.stdout)
			} else {
				err = r.WriteText(e.stdout)
			}
			if err != nil {
				return err
			}
			return r.Err()
		}),
	}
	cmd.Flags().StringVar(&o.Database, "database", "", "check only this database (its name under databases:), its instances and backup servers; default: everything configured")
	cmd.Flags().StringVar(&o.Instance, "instance", "", "with --database: the source instance, when the name is configured on several")
	jsonFlag(cmd, &asJSON, "print the report")
	return cmd
}
