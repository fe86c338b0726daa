package sqlsim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// raiseStmt is RAISERROR (msg, severity, state [, args...]) [WITH ...]
// (https://learn.microsoft.com/en-us/sql/t-sql/language-elements/raiserror-transact-sql).
type raiseStmt struct {
	msg             expr
	severity, state expr
	args            []expr
	log, nowait     bool
}

// throwStmt is THROW number, message, state
// (https://learn.microsoft.com/en-us/sql/t-sql/language-elements/throw-transact-sql);
// rethrow (no arguments) is nil number.
type throwStmt struct {
	number, msg, state expr
}

func (p *parser) raiseStmt() (stmt, error) {
	p.next()
	list, err := p.args()
	if err != nil {
		return nil, err
	}
	if len(list) < 3 {
		return nil, sqlErr(102, 15, "Incorrect syntax near ')'.")
	}
	s := &raiseStmt{msg: list[0], severity: list[1], state: list[2], args: list[3:]}
	if p.accept("WITH") {
		for {
			t := p.next()
			switch {
			case t.is("LOG"):
				s.log = true
			case t.is("NOWAIT"):
				s.nowait = true
			case t.is("SETERROR"):
			default:
				return nil, errNear(t)
			}
			if !p.acceptOp(",") {
				break
			}
		}
	}
	return s, nil
}

func (p *parser) throwStmt() (stmt, error) {
	p.next()
	if t := p.peek(); t.kind == tEOF || t.isOp(";") || t.is("END") {
		return &throwStmt{}, nil
	}
	var list []expr
	for range 3 {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		list = append(list, e)
		if len(list) < 3 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
	}
	return &throwStmt{number: list[0], msg: list[1], state: list[2]}, nil
}

// batchAbort marks an error that ends the batch whatever its severity
// (THROW's, outside TRY...CATCH).
type batchAbort struct{ e *tds.Error }

func (b *batchAbort) Error() string { return b.e.Error() }
func (b *batchAbort) Unwrap() error { return b.e }

// userMessage is the number of a RAISERROR or THROW with a message text.
const userMessage = 50000

func (x *execCtx) raise(n *raiseStmt) error {
	en := &env{x: x}
	sev, err := en.evalInt(n.severity)
	if err != nil {
		return err
	}
	state, err := en.evalInt(n.state)
	if err != nil {
		return err
	}
	msgV, err := en.eval(n.msg)
	if err != nil {
		return err
	}
	var args []any
	for _, a := range n.args {
		v, err := en.eval(a)
		if err != nil {
			return err
		}
		args = append(args, v)
	}
	number := int32(userMessage)
	var text string
	switch m := msgV.(type) {
	case int64:
		// A message number needs its text in sys.messages, which the
		// emulator does not keep.
		if m < 13000 || m == userMessage {
			return sqlErr(2732, 16, "Error number %d is invalid. The number must be from %d through %d and it cannot be %d.", m, 13000, 2147483647, userMessage)
		}
		number = int32(m)
		text = fmt.Sprintf("Error %d, severity %d, state %d was raised, but no message with that error number was found in sys.messages. If error is larger than 50000, make sure the user-defined message is added using sp_addmessage.", m, sev, state)
	default:
		text = raiseFormat(toString(m), args)
	}
	switch {
	case sev < 0:
		sev = 0
	case sev > 25:
		sev = 25
	}
	if sev > 18 && !(n.log && x.sessionLogin().hasServer("sysadmin")) {
		return sqlErr(2754, 16, "Error severity levels greater than 18 can only be specified by members of the sysadmin role, using the WITH LOG option.")
	}
	if state < 0 || state > 255 {
		state = 1
	}
	if sev <= 10 {
		// Severity 10 reaches the client as 0 ("Database Engine error
		// severities"), like every informational message.
		if sev == 10 {
			sev = 0
		}
		x.held = append(x.held, heldMsg{number, uint8(sev), text})
		if n.nowait {
			return x.flushHeld()
		}
		return nil
	}
	return &tds.Error{Number: number, State: uint8(state), Class: uint8(sev), Message: text, Line: 1}
}

func (x *execCtx) throw(n *throwStmt) error {
	if n.number == nil {
		return sqlErr(10704, 15, "To rethrow an error, a THROW statement must be used inside a CATCH block. Insert the THROW statement inside a CATCH block, or add error parameters to the THROW statement.")
	}
	en := &env{x: x}
	number, err := en.evalInt(n.number)
	if err != nil {
		return err
	}
	state, err := en.evalInt(n.state)
	if err != nil {
		return err
	}
	msg, err := en.eval(n.msg)
	if err != nil {
		return err
	}
	if number < userMessage || number > 2147483647 {
		return sqlErr(35100, 16, "Error number %d in the THROW statement is outside the valid range. Specify an error number in the valid range of 50000 to 2147483647.", number)
	}
	if state < 0 || state > 255 {
		return sqlErr(35101, 16, "State %d in the THROW statement is outside the valid range. Specify a state in the valid range of 0 to 255.", state)
	}
	return &batchAbort{&tds.Error{Number: int32(number), State: uint8(state), Class: 16, Message: toString(msg), Line: 1}}
}

func (e *env) evalInt(x expr) (int64, error) {
	v, err := e.eval(x)
	if err != nil {
		return 0, err
	}
	switch n := normValue(v).(type) {
	case int64:
		return n, nil
	case string:
		if i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64); err == nil {
			return i, nil
		}
		return 0, sqlErr(245, 16, "Conversion failed when converting the varchar value '%s' to data type int.", n)
	}
	return 0, sqlErr(245, 16, "Conversion failed when converting the value to data type int.")
}

// raiseFormat substitutes RAISERROR's printf-style arguments: %d and %i
// (signed), %u, %o, %x and %X, %s, with optional flags, width and
// precision (* takes them from the arguments); %% is a percent sign.
// A missing argument prints (null), as SQL Server does.
func raiseFormat(f string, args []any) string {
	var b strings.Builder
	next := func() (any, bool) {
		if len(args) == 0 {
			return nil, false
		}
		a := args[0]
		args = args[1:]
		return a, true
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		if j < len(f) && f[j] == '%' {
			b.WriteByte('%')
			i = j
			continue
		}
		spec := "%"
		for j < len(f) && strings.IndexByte("-+ 0#", f[j]) >= 0 {
			spec += string(f[j])
			j++
		}
		for j < len(f) && (f[j] == '*' || f[j] == '.' || (f[j] >= '0' && f[j] <= '9')) {
			if f[j] == '*' {
				a, _ := next()
				n, _ := normValue(a).(int64)
				spec += strconv.FormatInt(n, 10)
			} else {
				spec += string(f[j])
			}
			j++
		}
		for j < len(f) && (f[j] == 'h' || f[j] == 'l' || f[j] == 'I') { // size prefixes
			j++
		}
		if j >= len(f) {
			b.WriteString(f[i:])
			break
		}
		verb := f[j]
		i = j
		a, ok := next()
		if !ok || a == nil {
			b.WriteString("(null)")
			continue
		}
		switch verb {
		case 'd', 'i', 'u':
			n, _ := normValue(a).(int64)
			fmt.Fprintf(&b, spec+"d", n)
		case 'o', 'x', 'X':
			n, _ := normValue(a).(int64)
			fmt.Fprintf(&b, spec+string(verb), n)
		case 's':
			fmt.Fprintf(&b, spec+"s", toString(a))
		default:
			b.WriteByte('%')
			b.WriteByte(verb)
		}
	}
	return b.String()
}

// isBatchAbort reports whether err ends the batch whatever its severity.
func isBatchAbort(err error) bool {
	var b *batchAbort
	return errors.As(err, &b)
}
