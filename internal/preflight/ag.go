package preflight

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// availabilityChecks are the checks of database d of availability group g
// on one of its replicas, where the cycle may back it up: whether it is an
// availability database there, the replica's role and synchronization
// (sys.dm_hadr_database_replica_states, VIEW SERVER STATE), whether SQL
// Server names the replica as the preferred backup replica, and
// owns_backup_chain, which a secondary cannot honour ("BACKUP DATABASE
// supports only copy-only full backups ... when it's executed on secondary
// replicas", "Offload supported backups to secondary replicas of an
// availability group"): refused where the preferred replica is a
// secondary, as the cycle's plan refuses it.
func availabilityChecks(ctx context.Context, q querier, replica string, d *config.Database, g *config.AvailabilityGroup, sf serverFacts) []Check {
	base := Check{Kind: KindDatabase, Instance: replica, Database: d.Name}
	ag := base
	ag.Name, ag.For = "availability group "+g.Name, "source: the replica the group's cycle backs up on"
	query, args, err := tsql.PreferredBackupReplica(d.Name)
	if err != nil {
		ag.Status, ag.Detail = Missing, err.Error()
		return []Check{ag}
	}
	var preferred sql.NullBool
	if err := queryRow(ctx, q, "preferred backup replica", query, args, &preferred); err != nil {
		ag.Status, ag.Detail, ag.Fix = Missing, "could not ask: "+err.Error(), "run preflight again; the error names the cause"
		return []Check{ag}
	}
	query, args, err = tsql.ReplicaState(d.Name)
	if err != nil {
		ag.Status, ag.Detail = Missing, err.Error()
		return []Check{ag}
	}
	var primary sql.NullBool
	var state sql.NullString
	role := ""
	err = queryRow(ctx, q, "replica state", query, args, &primary, &state)
	switch {
	case errors.Is(err, errNoRow):
		ag.Status = Warn
		ag.Detail = fmt.Sprintf("%s is not an availability database on %s: the group's cycles back it up on the replicas where it is", d.Name, replica)
		ag.Fix = fmt.Sprintf("join %s to availability group %s on %s, or remove %s from the group's replicas", d.Name, g.SQLName(), replica, replica)
		return []Check{ag}
	case err != nil:
		ag.Status = Warn
		ag.Detail = "role and synchronization not read (" + err.Error() + "): the cycle then backs up COPY_ONLY and cannot pass over a replica that does not synchronize"
		ag.Fix, _ = tsql.GrantServerPermission(sf.viewStatePerm(), sf.Login)
	case primary.Bool:
		role = "primary"
		ag.Status, ag.Detail = OK, "primary replica"
	default:
		role = "secondary"
		ag.Status, ag.Detail = OK, "secondary replica, "+state.String
		if s := strings.ToUpper(state.String); s != "SYNCHRONIZED" && s != "SYNCHRONIZING" {
			ag.Status = Warn
			ag.Detail += ": a secondary backs up only while SYNCHRONIZED or SYNCHRONIZING, so the cycle passes it over"
			ag.Fix = fmt.Sprintf("resume data movement: ALTER DATABASE %s SET HADR RESUME (on %s)", quotedName(d.Name), replica)
		}
	}
	if preferred.Bool {
		ag.Detail += "; the preferred backup replica now"
	} else {
		ag.Detail += "; not the preferred backup replica now"
	}
	cs := []Check{ag}
	if !d.OwnsBackupChain {
		return cs
	}
	chain := base
	chain.Name, chain.For = "owns_backup_chain", "source: full backups that are not COPY_ONLY"
	switch {
	case !preferred.Bool:
		chain.Status, chain.Detail = OK, "not the preferred backup replica: the cycle does not back up here"
	case role == "primary":
		chain.Status, chain.Detail = OK, "the preferred backup replica is the primary, which takes full backups that are not COPY_ONLY"
	case role == "secondary":
		chain.Status = Missing
		chain.Detail = fmt.Sprintf("owns_backup_chain is true, but the preferred backup replica of %s is %s, a secondary: SQL Server takes only COPY_ONLY full backups there, and the cycle fails with InvalidConfig before its BACKUP", g.Name, replica)
		chain.Fix = fmt.Sprintf("ALTER AVAILABILITY GROUP %s SET (AUTOMATED_BACKUP_PREFERENCE = PRIMARY); (on the primary), or remove owns_backup_chain from %s", quotedName(g.SQLName()), d.ID())
	default:
		chain.Status = Missing
		chain.Detail = "owns_backup_chain is true and this is the preferred backup replica, but its role could not be read: the cycle refuses to back up where it cannot tell the primary"
		chain.Fix, _ = tsql.GrantServerPermission(sf.viewStatePerm(), sf.Login)
	}
	return append(cs, chain)
}

// quotedName is name as a T-SQL identifier for a fix.
func quotedName(name string) string {
	if q, err := tsql.QuoteIdent(name); err == nil {
		return q
	}
	return name
}

// errNoRow is queryRow's error for a query that returned nothing.
var errNoRow = errors.New("no row")
