package tds

import (
	"errors"
	"fmt"
	"sync"
)

// errWriterDone is returned when a handler keeps writing after Exec
// returned.
var errWriterDone = errors.New("tds: ResultWriter used after Exec returned")

// resultWriter implements ResultWriter for one request. The DONE of a
// statement is held back until something follows it, because only then is
// it known whether it needs the MORE bit.
type resultWriter struct {
	c   *conn
	p   *pending
	rpc bool
	// langBefore is the session language when the request started.
	langBefore string

	mu       sync.Mutex
	pre      []byte // tokens that open the reply (reset ack, ...)
	cols     []Column
	wire     []Column // cols as this client's TDS version gets them (downlevel)
	mapped   bool     // wire differs from cols
	pending  *doneToken
	scratch  []byte
	finished bool
	fatal    bool // an ERROR of class >= 20 was sent: the connection ends
}

type doneToken struct {
	status, cmd uint16
	rows        uint64
}

// check refuses writes once the request is cancelled (attention or a
// dropped connection) so the handler stops promptly.
func (w *resultWriter) check() error {
	if w.finished {
		return errWriterDone
	}
	if err := w.p.ctx.Err(); err != nil {
		return err
	}
	return w.c.pw.err
}

// write sends b after the opening tokens and any held-back DONE.
func (w *resultWriter) write(b []byte) error {
	w.writePending()
	_, err := w.c.pw.Write(b)
	return err
}

func (w *resultWriter) writePending() {
	if len(w.pre) > 0 {
		_, _ = w.c.pw.Write(w.pre)
		w.pre = nil
	}
	if w.pending != nil {
		d := w.pending
		w.pending = nil
		w.writeDone(d.status|doneMore, d.cmd, d.rows)
	}
}

// writeDone writes a statement's DONE: DONEINPROC inside an RPC.
func (w *resultWriter) writeDone(status, cmd uint16, rows uint64) {
	tok := byte(tokenDone)
	if w.rpc {
		tok = tokenDoneInProc
		status |= doneMore // the DONEPROC that ends the RPC follows
	}
	var buf [13]byte
	_, _ = w.c.pw.Write(w.c.appendDone(buf[:0], tok, status, cmd, rows))
}

func (w *resultWriter) Info(number int32, class uint8, msg string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	e := &Error{Number: number, State: 1, Class: class, Message: msg}
	if err := w.write(w.c.appendMsg(w.scratch[:0], class > 10, e)); err != nil {
		return err
	}
	// The driver queues a message per packet parsed: flush so progress
	// reaches the client while the statement still runs.
	return w.c.pw.flush()
}

func (w *resultWriter) Error(e *Error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	if e.Class >= fatalClass && !e.KeepSession {
		w.fatal = true
	}
	return w.write(w.c.appendMsg(w.scratch[:0], e.Class > 10, e))
}

func (w *resultWriter) Columns(cols []Column) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	if err := checkColumns(cols); err != nil {
		return err
	}
	w.cols = append([]Column(nil), cols...)
	w.wire, w.mapped = downlevel(w.cols, w.c.ver)
	return w.write(appendColMetadata(w.scratch[:0], w.wire, w.c.ver))
}

func (w *resultWriter) Row(values ...any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	if w.cols == nil {
		return errors.New("tds: Row called before Columns")
	}
	if w.mapped && len(values) == len(w.cols) {
		conv := make([]any, len(values))
		for i, v := range values {
			var err error
			if conv[i], err = downlevelValue(w.cols[i], w.wire[i], v); err != nil {
				return fmt.Errorf("tds: column %d %q: %w", i, w.cols[i].Name, err)
			}
		}
		values = conv
	}
	b, segs, err := encodeRow(w.scratch[:0], w.wire, values)
	w.scratch = b[:0]
	if err != nil {
		return err
	}
	w.writePending()
	pw := w.c.pw
	at := 0
	for _, s := range segs {
		_, _ = pw.Write(b[at:s.at])
		at = s.at
		if s.ucs {
			w.writeUCS2(s.str)
		} else {
			_, _ = pw.Write(s.bin)
		}
		pw.u32(0) // PLP terminator
	}
	_, err = pw.Write(b[at:])
	return err
}

// writeUCS2 streams a long string as UTF-16LE without building it whole.
func (w *resultWriter) writeUCS2(s string) {
	buf := make([]byte, 0, 4*ucs2ChunkChars)
	for len(s) > 0 {
		n := min(len(s), ucs2ChunkChars)
		for n < len(s) && s[n]&0xC0 == 0x80 { // do not split a rune
			n++
		}
		buf = appendUCS2(buf[:0], s[:n])
		if _, err := w.c.pw.Write(buf); err != nil {
			return
		}
		s = s[n:]
	}
}

func (w *resultWriter) StatementDone(cmd uint16, rows int64, hasCount bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	w.writePending()
	d := &doneToken{cmd: cmd}
	if hasCount {
		d.status |= doneCount
		d.rows = uint64(max(rows, 0))
	}
	w.pending = d
	w.cols = nil
	return w.c.pw.err
}

func (w *resultWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	// A held-back DONE stays back: only the end of the request decides
	// whether it is the last.
	return w.c.pw.flush()
}

// finish ends the reply after Exec returned err: the held-back DONE, the
// error tokens, and the final DONE (DONEPROC for an RPC), or DONE(ATTN)
// when the client cancelled.
func (w *resultWriter) finish(err error, dbBefore string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished = true
	attn := w.c.endRequest(w.p)
	if w.c.ctx.Err() != nil {
		return // the connection is gone: nobody to answer
	}
	pw := w.c.pw
	var b []byte
	if attn {
		// The cancelled request's response ends here, and the attention,
		// a client message of its own, gets a response of its own: a
		// message holding only DONE(ATTN). tedious relies on that shape
		// (it reads the acknowledgement from the message after the
		// cancelled request's); go-mssqldb and FreeTDS read on until the
		// acknowledgement either way.
		w.writePending()
		_, _ = pw.Write(w.c.appendDone(b, tokenDone, 0, 0, 0))
		_ = pw.endMessage()
		_, _ = pw.Write(w.c.appendDone(nil, tokenDone, doneAttn, 0, 0))
		_ = pw.endMessage()
		return
	}
	if db := w.c.sess.Database(); db != dbBefore {
		// USE switched the database: tell the driver, as SQL Server does.
		w.pre = envChangeString(w.pre, envDatabase, db, dbBefore)
	}
	if lang := sessionLanguage(w.c.sess); lang != w.langBefore {
		// SET LANGUAGE: ENVCHANGE type 2, as SQL Server sends it.
		w.pre = envChangeString(w.pre, envLanguage, lang, w.langBefore)
	}
	if err != nil {
		w.writePending()
		for _, e := range w.c.toErrors(err) {
			b = w.c.appendMsg(b, true, e)
		}
		if w.rpc {
			b = w.c.appendDone(b, tokenDoneProc, doneError, 0, 0)
		} else {
			b = w.c.appendDone(b, tokenDone, doneError, 0, 0)
		}
		_, _ = pw.Write(b)
		_ = pw.endMessage()
		return
	}
	if len(w.pre) > 0 {
		_, _ = pw.Write(w.pre)
		w.pre = nil
	}
	d := w.pending
	w.pending = nil
	if w.rpc {
		if d != nil {
			w.writeDone(d.status, d.cmd, d.rows)
		}
		b = append(b, tokenReturnStat)
		b = appendU32(b, 0)
		b = w.c.appendDone(b, tokenDoneProc, 0, 0, 0)
	} else if d != nil {
		b = w.c.appendDone(b, tokenDone, d.status, d.cmd, d.rows)
	} else {
		b = w.c.appendDone(b, tokenDone, 0, 0, 0)
	}
	_, _ = pw.Write(b)
	_ = pw.endMessage()
}

// fatalClass is the lowest severity at which SQL Server ends the session
// after sending the error ("Database engine error severities": 20-24 are
// fatal errors that terminate the connection,
// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-error-severities).
const fatalClass = 20

// appendMsg appends an INFO or ERROR token in the session's language.
func (c *conn) appendMsg(b []byte, isError bool, e *Error) []byte {
	if l, ok := c.sess.(Localizer); ok && l != nil {
		e = l.Localize(e)
	}
	return appendMessage(b, isError, e, c.s.opts.ServerName, c.ver)
}

// sessionLanguage is the session's language name, "" when it has none.
func sessionLanguage(s Session) string {
	if l, ok := s.(Localizer); ok && l != nil {
		return l.Language()
	}
	return ""
}

// isFatal reports whether err holds an error of class 20 or more.
func isFatal(err error) bool {
	var es Errors
	if errors.As(err, &es) {
		for _, e := range es {
			if e.Class >= fatalClass && !e.KeepSession {
				return true
			}
		}
		return false
	}
	var e *Error
	return errors.As(err, &e) && e.Class >= fatalClass && !e.KeepSession
}
