// Package tds is the wire-protocol half of the SQL Server emulator: it speaks
// TDS 7.4 to go-mssqldb (prelogin, login7, SQL batch, RPC sp_executesql,
// attention, reset connection) and hands every request to a Handler. Older
// clients (TDS 7.1 to 7.3, e.g. FreeTDS or tedious configured so) get their
// own version and the encodings SQL Server sends them (downlevel.go). It knows
// nothing about databases, backups or T-SQL semantics: those live in the
// engine (package sqlsim).
//
// handler.go holds the contract between the two halves. The server side:
//
//	srv := tds.NewServer(engine, tds.Options{ServerName: "sql01"}, log)
//	go srv.Serve(listener) // returns nil after Close
//	srv.DropConnections()  // crash emulation: every client sees a broken connection
//	srv.Close()            // stop accepting, drop connections, wait for handlers
//
// Without Options.TLS encryption is answered NOT_SUP: clients must use
// encrypt=disable (or false); with it, encryption is required (tls.go).
// An ERROR of class 20 or more ends the connection once it is sent, as
// SQL Server ends the session. Malformed input closes only that
// connection, logged with the keys remote, spid and reason.
package tds

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// Handler is implemented by the engine. One Handler serves every connection
// of a Server; it must be safe for concurrent use.
type Handler interface {
	// Login authenticates a LOGIN7 request. It returns the session that will
	// serve this connection's requests, or an *Error (18456 login failed,
	// 4060 cannot open database) that the server sends before closing.
	Login(ctx context.Context, l Login) (Session, error)
}

// Login is what the client sent in LOGIN7, plus what the server knows about
// the connection.
type Login struct {
	User       string
	Password   string
	Database   string // "" means the login's default database
	Language   string // LOGIN7 language, "" means the login's default
	AppName    string
	HostName   string
	PacketSize int // negotiated packet size
	SPID       uint16
	RemoteAddr net.Addr
	// Windows: the server authenticated User (DOMAIN\user) itself through
	// SSPI (NTLM, see WindowsAccounts); Password is empty.
	Windows bool
	// What the connection is, for sys.dm_exec_connections: the server's
	// address, whether TLS protects it, the TDS version acknowledged.
	LocalAddr  net.Addr
	Encrypted  bool
	TDSVersion uint32
}

// WindowsAccounts is what a Handler implements to accept Windows logins:
// the server then runs NTLM itself, playing the domain controller, with
// the password WindowsPassword gives for DOMAIN\user (false: no such
// account). Without it a LOGIN7 asking for integrated authentication is
// refused with 18452, as from an untrusted domain.
type WindowsAccounts interface {
	WindowsPassword(login string) (string, bool)
	// WindowsDomain is the domain the server belongs to, named in its
	// NTLM challenge.
	WindowsDomain() string
}

// Session serves the requests of one connection, one at a time.
type Session interface {
	// Database is the session's current database, reported in ENVCHANGE at
	// login (and after Reset).
	Database() string

	// Exec runs one request: a SQL batch (Params empty) or an
	// sp_executesql RPC (Params holds @p1.. or named parameters).
	// ctx is cancelled when the client sends an attention (cancel) or the
	// connection ends; context.Cause(ctx) tells which (ErrAttention,
	// ErrConnectionClosed). After an attention the handler must stop
	// promptly and return ctx.Err() (the server answers with DONE+ATTN);
	// on a closed connection it may run on, as SQL Server does, until a
	// write through w fails.
	//
	// Results go through w. Returning an *Error or Errors makes the server
	// send the ERROR token(s) followed by a DONE with the error bit; any
	// other non-nil error is sent as error 50000 class 16 and logged.
	// Returning ErrKillConnection drops the connection without a reply
	// (used to emulate a crashed host).
	Exec(ctx context.Context, req Request, w ResultWriter) error

	// Reset is called when a request carries RESETCONNECTION: database back
	// to the login database, SET options cleared.
	Reset()

	// Close is called once when the connection ends, for any reason.
	Close()
}

// Localizer is implemented by a Session whose messages are sent in a
// language of its own (SET LANGUAGE, the login's default language): every
// INFO and ERROR token of the session passes through Localize, which
// returns the message to send (same number, state and class). Language is
// the session's language name, reported in ENVCHANGE when it changes.
type Localizer interface {
	Localize(e *Error) *Error
	Language() string
}

// Request is one client request.
type Request struct {
	SQL    string
	Params []Param
	RPC    bool // true for sp_executesql
	// Declarations is sp_executesql's parameter list as the client
	// declared it ("@p1 int, @p2 nvarchar(max)"); "" without parameters.
	Declarations string
}

// Param is one RPC parameter. Value is one of: nil (NULL), int64 (every
// integer type), bool, float64 (float/real), string (nvarchar, varchar;
// also decimal/money as "-123.45" and uniqueidentifier in canonical form),
// []byte, time.Time (datetimeoffset keeps the sender's offset as a fixed
// zone; datetime, datetime2, date and time are UTC).
type Param struct {
	Name   string // with the leading @, e.g. "@p1" or "@FileName"
	Value  any
	Output bool
}

// ResultWriter streams a request's results to the client. The server takes
// care of DONE/DONEINPROC/DONEPROC framing (MORE bits, the final DONE, RPC
// wrapping): the handler only says where a statement ends.
//
// Calls are serialized, so a progress goroutine may call Info while the
// statement's goroutine writes. Once the request is cancelled (attention
// or a dropped connection) every method returns the context's error and
// writes nothing; after Exec returns they fail. A write to a slow client
// blocks (the driver stops reading while its message queue is full) but
// never delays the attention that cancels ctx.
type ResultWriter interface {
	// Info sends an INFO token (class 0-10; an ERROR token above 10) and
	// flushes it to the client at once, so progress messages ("10 percent
	// processed.") arrive while the statement still runs.
	Info(number int32, class uint8, msg string) error

	// Error sends an ERROR token (class 11+) that is not the last one of the
	// request, e.g. 3201 before the final 3013. The request still fails only
	// if Exec returns an error.
	Error(e *Error) error

	// Columns starts a result set (COLMETADATA).
	Columns(cols []Column) error

	// Row sends one ROW; values are in column order and of the Go types
	// listed on ColumnType. A value of the wrong type or too long for its
	// column is refused with an error naming the column (the driver would
	// panic on it), and nothing of that row is sent.
	Row(values ...any) error

	// StatementDone ends one statement: cmd is the CurCmd (CmdSelect,
	// CmdInsert, ...), rows the row count (sent with the COUNT bit when
	// hasCount). A request made of several statements calls it once each.
	StatementDone(cmd uint16, rows int64, hasCount bool) error

	// Flush sends what is buffered as a non-final packet.
	Flush() error
}

// CurCmd values for StatementDone.
const (
	CmdSelect  uint16 = 0xC1
	CmdInsert  uint16 = 0xC3
	CmdDelete  uint16 = 0xC4
	CmdUpdate  uint16 = 0xC5
	CmdExecute uint16 = 0xE0
)

// ColumnType is the SQL type of a result column. Go value types for Row:
//
//	TypeInt, TypeBigInt, TypeSmallInt, TypeTinyInt: int64 (any Go integer accepted)
//	TypeBit: bool
//	TypeNVarChar (Size = max characters counted in UTF-16 units, as SQL Server
//	  does: a character outside the BMP counts 2; 0 or >4000 means nvarchar(max)): string
//	TypeChar (Size = bytes): string
//	TypeDateTime, TypeDateTime2: time.Time
//	TypeNumeric (Precision, Scale): int64 (scaled integer) or string ("123.45")
//	TypeUniqueIdentifier: [16]byte in canonical (big-endian) order, or string
//	TypeReal, TypeFloat: float64
//	TypeVarBinary (Size; 0 or >8000 means varbinary(max)): []byte
//	TypeVariant (sql_variant, e.g. SERVERPROPERTY): string, Go integer, bool or float64
//
// nil is NULL for every type (the column should be Nullable).
type ColumnType int

const (
	TypeInt ColumnType = iota + 1
	TypeBigInt
	TypeSmallInt
	TypeTinyInt
	TypeBit
	TypeNVarChar
	TypeChar
	TypeDateTime
	TypeDateTime2
	TypeNumeric
	TypeUniqueIdentifier
	TypeReal
	TypeFloat
	TypeVarBinary
	TypeVariant
)

// Column describes one result column.
type Column struct {
	Name      string
	Type      ColumnType
	Size      int // nvarchar/char/varbinary length
	Precision uint8
	Scale     uint8
	Nullable  bool
}

// Error is a SQL Server error or message with its real number, state and
// class (severity).
type Error struct {
	Number    int32
	State     uint8
	Class     uint8
	Message   string
	Procedure string
	Line      int32
	// KeepSession: an error of severity 20 or more after which the
	// session stays open. SQL Server ends the task that raised such an
	// error, and "in most cases" the connection "may also terminate"
	// ("Database engine error severities",
	// https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-error-severities):
	// not always.
	KeepSession bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("mssql error %d (class %d, state %d): %s", e.Number, e.Class, e.State, e.Message)
}

// Errors is several errors of one failed request, in the order sent; the
// client reports the last one (e.g. 3201 then 3013).
type Errors []*Error

func (es Errors) Error() string {
	if len(es) == 0 {
		return "no errors"
	}
	return es[len(es)-1].Error()
}

// ErrAttention and ErrConnectionClosed are the causes (context.Cause) of a
// cancelled Exec context: the client sent an attention, or the connection
// ended (closed by the client, lost on the network or dropped by the server).
var (
	ErrAttention        = fmt.Errorf("tds: attention: the client cancelled the request")
	ErrConnectionClosed = fmt.Errorf("tds: connection closed")
)

// ErrKillConnection, returned by Exec or Login, drops the connection
// without a reply, like a host that died.
var ErrKillConnection = fmt.Errorf("tds: kill connection")

// Options configure a Server.
type Options struct {
	ServerName string // reported in ERROR/INFO tokens and LOGINACK
	// Version reported in PRELOGIN/LOGINACK, e.g. {16, 0, 4135}.
	Major, Minor uint8
	Build        uint16
	// ReadTimeout bounds the wait for a whole message once its first packet
	// arrived; 0 means none.
	ReadTimeout time.Duration
	// MaxMessageSize bounds one client message (a batch, or an RPC with its
	// parameters) in bytes; a longer one closes the connection. 0 means
	// 64 MiB.
	MaxMessageSize int
	// TLS, when set, makes encryption required: a TDS 7.x client gets
	// ENCRYPT_ON/REQ and the TLS handshake inside PRELOGIN (a client that
	// cannot encrypt is refused), a TDS 8.0 client (TLS first, ALPN
	// "tds/8.0") is served too. Certificates must be set.
	TLS *tls.Config
	// TLSStrict accepts only TDS 8.0 (encrypt=strict) clients.
	TLSStrict bool
}
