package sqlsim

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// A client that vanishes without an attention (its process killed, its
// network path lost) does not stop the statement it sent: SQL Server sees
// the loss only when it next writes to the connection. A BACKUP, RESTORE or
// DBCC CHECKDB therefore runs on, visible in sys.dm_exec_requests, until
// its next message: a STATS progress message (3211) is sent at once, so it
// ends the statement at the next STATS step, rolled back as for a dropped
// connection (stripes without a trailer, a RESTORING database); other
// messages (4035, 3014, 3262, PRINT, ...) wait in the connection's output
// buffer until the statement ends, so a statement without STATS completes
// (msdb history written) and only its reply is lost. An attention, KILL or
// a crash stop it at once.
// https://learn.microsoft.com/en-us/sql/t-sql/statements/backup-transact-sql
// (STATS "displays a message each time another percentage completes");
// https://support.microsoft.com/kb/827575 (results wait in the
// connection's output buffer until the client reads them).

// heldMsg is an info message waiting for the end of its statement.
type heldMsg struct {
	number int32
	class  uint8
	text   string
}

// info queues an info message (class 0-10) for the end of the statement,
// as SQL Server buffers messages in the connection's output buffer.
func (x *execCtx) info(number int32, class uint8, text string) {
	x.held = append(x.held, heldMsg{number, class, text})
}

// flushHeld sends the held messages; the error is the first failed write
// (the client is gone).
func (x *execCtx) flushHeld() error {
	held := x.held
	x.held = nil
	for _, m := range held {
		if err := x.w.Info(m.number, m.class, m.text); err != nil {
			return err
		}
	}
	return nil
}

// progress sends a message at once (STATS): on a vanished client this is
// the write that fails and ends the statement.
func (x *execCtx) progress(number int32, text string) error {
	return x.w.Info(number, 0, text)
}

// clientGone reports whether the request's connection ended without an
// attention.
func (x *execCtx) clientGone() bool {
	return x.client != nil && x.client.Err() != nil && errors.Is(context.Cause(x.client), tds.ErrConnectionClosed)
}

// DisconnectClient closes the TCP connection of session spid as a client
// that vanished would (no attention): its running statement runs on until
// its next write to the client, see above. It reports whether the session
// had a connection.
func (in *Instance) DisconnectClient(spid int) bool {
	in.mu.Lock()
	srv, running := in.srv, in.running
	in.mu.Unlock()
	if srv == nil || !running || spid <= 0 || spid > 32767 {
		return false
	}
	in.log.Info("closing a client connection without attention (fault injection)", zap.Int("spid", spid))
	return srv.DropConnection(uint16(spid))
}
