package activities

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/mssql"
	"github.com/backupcycle/backupcycle/internal/tsql"
)

// Availability groups: which replica backs a database of a group up.

// SkipNotPreferredReplica is the reason a cycle ends skipped when no
// replica of the database's availability group can back it up now (none is
// the preferred backup replica, or the one that is cannot back up): not a
// failure, and nothing about any set.
const SkipNotPreferredReplica = "not-preferred-replica"

// Roles of the replica a cycle backs up on (SourceFacts.Role).
const (
	RolePrimary   = "PRIMARY"
	RoleSecondary = "SECONDARY"
)

// replicaChoice is the replica a cycle of a group's database backs up on,
// its role there ("" when the login may not read it), and what each
// replica answered (for the skip's reason and the log).
type replicaChoice struct {
	replica, role string
	answers       []string
	warnings      []string
}

// chooseReplica asks every replica of g, in the configured order, whether
// it is the preferred backup replica of database name
// (sys.fn_hadr_backup_is_preferred_replica: SQL Server's own reading of
// the group's AUTOMATED_BACKUP_PREFERENCE and BACKUP_PRIORITY, which it
// does not enforce: "Configure backups on secondary replicas of an Always
// On availability group"), and picks the first that says 1. A replica that
// cannot be reached or asked is passed over; so is one whose copy of the
// database is not an availability database there, and a secondary whose
// copy is neither SYNCHRONIZED nor SYNCHRONIZING ("to back up a secondary
// database, a secondary replica must be able to communicate with the
// primary replica and must be SYNCHRONIZED or SYNCHRONIZING", "Offload
// supported backups to secondary replicas of an availability group"; the
// function does not look at it). replica "" means none can back it up now.
func (a *Activities) chooseReplica(ctx context.Context, g *config.AvailabilityGroup, name string) replicaChoice {
	var ch replicaChoice
	log := a.loggerFor(ctx).With(zap.String("db", name), zap.String("availability_group", g.Name))
	for _, r := range g.Replicas {
		ok, answer, role, warn := a.askReplica(ctx, r, name)
		ch.answers = append(ch.answers, r+": "+answer)
		if warn != "" {
			ch.warnings = append(ch.warnings, warn)
		}
		log.Info("replica asked for the preferred backup replica", zap.String("instance", r), zap.String("answer", answer))
		if ok {
			ch.replica, ch.role = r, role
			return ch
		}
	}
	return ch
}

// askReplica asks one replica; ok when it is the one to back up on.
func (a *Activities) askReplica(ctx context.Context, replica, name string) (ok bool, answer, role, warning string) {
	inst, err := a.Cycle.instance(replica)
	if err != nil {
		return false, "not configured: " + err.Error(), "", ""
	}
	sqlDB, err := a.Cycle.openSQL(ctx, inst, "master")
	if err != nil {
		typ := errorTypeOf(err)
		if typ == ErrLoginFailed || typ == ErrInvalidConfig {
			// Not an outage: the login or the settings of this replica
			// are wrong, and a fail-over to it would fail the same way.
			warning = fmt.Sprintf("availability group replica %s cannot be used: %v", replica, err)
		}
		return false, fmt.Sprintf("not reachable (%v)", err), "", warning
	}
	defer sqlDB.Close()
	q, args, err := tsql.PreferredBackupReplica(name)
	if err != nil {
		return false, err.Error(), "", ""
	}
	var preferred sql.NullBool
	if err := sqlDB.QueryRowContext(ctx, q, args...).Scan(&preferred); err != nil {
		return false, fmt.Sprintf("not asked (%v)", sqlError(mssql.Classify(sqlDB.Target, "ask the preferred backup replica", err))), "", ""
	}
	if !preferred.Bool {
		return false, "not the preferred backup replica", "", ""
	}
	q, args, err = tsql.ReplicaState(name)
	if err != nil {
		return false, err.Error(), "", ""
	}
	var primary sql.NullBool
	var state sql.NullString
	err = sqlDB.QueryRowContext(ctx, q, args...).Scan(&primary, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// The function answers 1 for a database outside any group: this
		// replica's copy is not (or no longer) in the group.
		return false, fmt.Sprintf("'%s' is not an availability database here", tsql.Printable(name)), "", ""
	case err != nil:
		// Without VIEW SERVER STATE the role is unknown: the backup is
		// COPY_ONLY, which every replica takes (backupMode).
		return true, "preferred (role not read)", "", fmt.Sprintf(
			"role of %s on availability group replica %s not read (%v): backing up COPY_ONLY, which every replica takes; grant VIEW SERVER STATE (VIEW SERVER PERFORMANCE STATE on SQL Server 2022) to the login on every replica",
			name, replica, sqlError(mssql.Classify(sqlDB.Target, "read the replica state", err)))
	case primary.Bool:
		return true, "preferred (primary)", RolePrimary, ""
	}
	if s := strings.ToUpper(state.String); s != "SYNCHRONIZED" && s != "SYNCHRONIZING" {
		return false, fmt.Sprintf("preferred, but a secondary whose copy is %s: a secondary backs up only while SYNCHRONIZED or SYNCHRONIZING", state.String), "", ""
	}
	return true, "preferred (secondary, " + state.String + ")", RoleSecondary, ""
}

// notPreferredReason is the skip's reason: what every replica answered.
func (ch replicaChoice) notPreferredReason(g *config.AvailabilityGroup, name string) string {
	return fmt.Sprintf("%s: no replica of availability group %s can back up '%s' now (%s): the cycle runs again at its next start",
		SkipNotPreferredReplica, g.Name, tsql.Printable(name), strings.Join(ch.answers, "; "))
}

// checkChainOnReplica refuses owns_backup_chain where SQL Server takes no
// full backup that is not COPY_ONLY: on a secondary replica ("BACKUP
// DATABASE supports only copy-only full backups ... when it's executed on
// secondary replicas", "Offload supported backups to secondary replicas of
// an availability group"), and where the role could not be read. Before
// any BACKUP, with the fix.
func checkChainOnReplica(db *config.Database, g *config.AvailabilityGroup, role string) error {
	if !db.OwnsBackupChain || db.Replica == "" || role == RolePrimary {
		return nil
	}
	if role == "" {
		return nonRetryable(ErrInvalidConfig, fmt.Errorf(
			"database %s: owns_backup_chain is true, but the role of replica %s of availability group %s could not be read, and a full backup that is not COPY_ONLY runs only on the primary: grant VIEW SERVER STATE (VIEW SERVER PERFORMANCE STATE on SQL Server 2022) to the login on every replica",
			db.ID(), db.Replica, g.Name))
	}
	return nonRetryable(ErrInvalidConfig, fmt.Errorf(
		"database %s: owns_backup_chain is true, but the preferred backup replica of availability group %s is %s, a secondary, where SQL Server takes only COPY_ONLY full backups: back up on the primary (ALTER AVAILABILITY GROUP %s SET (AUTOMATED_BACKUP_PREFERENCE = PRIMARY)), or remove owns_backup_chain (COPY_ONLY leaves the chain to the DBA's own backups)",
		db.ID(), g.Name, db.Replica, quoted(g.SQLName())))
}

// quoted is name as a T-SQL identifier for a message (QUOTENAME's form).
func quoted(name string) string {
	if q, err := tsql.QuoteIdent(name); err == nil {
		return q
	}
	return name
}
