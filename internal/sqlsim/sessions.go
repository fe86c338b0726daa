package sqlsim

import (
	"net"

	"github.com/backupcycle/backupcycle/internal/sqlsim/tds"
)

// sessionView answers sys.dm_exec_sessions and sys.dm_exec_connections,
// the views a DBA reads to see who is connected, how (encrypt_option,
// auth_scheme, protocol_version) and from where:
//   - sys.dm_exec_sessions shows a login its own session, and every session
//     with VIEW SERVER STATE (2022: VIEW SERVER PERFORMANCE STATE)
//     (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-sessions-transact-sql#permissions);
//   - original_login_name is "the login with which the user created the
//     session" (the same page): the emulator has no impersonation, so it is
//     the session's login, named as ORIGINAL_LOGIN() names it;
//   - sys.dm_exec_connections needs that permission to be read at all:
//     without it, 300 then 297
//     (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-exec-connections-transact-sql#permissions).
func (x *execCtx) sessionView(name, qual string) (*relation, error) {
	all := x.in.canSeeAllRequests(x.sessionLogin())
	if name == "dm_exec_connections" && !all {
		return nil, x.serverStateDenied()
	}
	rel := &relation{}
	x.in.mu.Lock()
	var sessions []*session
	for _, s := range x.in.sessions {
		if all || s.id == x.s.id {
			sessions = append(sessions, s)
		}
	}
	x.in.mu.Unlock()
	if name == "dm_exec_sessions" {
		rel.cols = []relCol{col(qual, "session_id", tds.TypeSmallInt, 0), col(qual, "login_time", tds.TypeDateTime, 0),
			col(qual, "host_name", tds.TypeNVarChar, 128), col(qual, "program_name", tds.TypeNVarChar, 128),
			col(qual, "login_name", tds.TypeNVarChar, 128), col(qual, "status", tds.TypeNVarChar, 30),
			col(qual, "database_id", tds.TypeSmallInt, 0), col(qual, "language", tds.TypeNVarChar, 128),
			col(qual, "is_user_process", tds.TypeBit, 0), col(qual, "original_login_name", tds.TypeNVarChar, 128)}
		for _, s := range sessions {
			status := "sleeping"
			if x.in.sessionRunning(s.id) {
				status = "running"
			}
			var dbID any
			if d := x.in.lookupDB(s.Database()); d != nil {
				dbID = int64(d.ID)
			}
			rel.rows = append(rel.rows, []any{int64(s.id), x.in.serverTime(s.connected), s.login.HostName, s.login.AppName,
				s.login.User, status, dbID, s.language().name, true, x.in.loginName(s.login.User)})
		}
	} else {
		rel.cols = []relCol{col(qual, "session_id", tds.TypeInt, 0), col(qual, "most_recent_session_id", tds.TypeInt, 0),
			col(qual, "connect_time", tds.TypeDateTime, 0), col(qual, "net_transport", tds.TypeNVarChar, 40),
			col(qual, "protocol_type", tds.TypeNVarChar, 40), col(qual, "protocol_version", tds.TypeInt, 0),
			col(qual, "encrypt_option", tds.TypeNVarChar, 40), col(qual, "auth_scheme", tds.TypeNVarChar, 40),
			col(qual, "net_packet_size", tds.TypeInt, 0), col(qual, "client_net_address", tds.TypeNVarChar, 48),
			col(qual, "client_tcp_port", tds.TypeInt, 0), col(qual, "local_net_address", tds.TypeNVarChar, 48),
			col(qual, "local_tcp_port", tds.TypeInt, 0)}
		for _, s := range sessions {
			l := s.login
			enc, auth := "FALSE", "SQL"
			if l.Encrypted {
				enc = "TRUE"
			}
			if l.Windows {
				auth = "NTLM"
			}
			cAddr, cPort := tcpParts(l.RemoteAddr)
			lAddr, lPort := tcpParts(l.LocalAddr)
			rel.rows = append(rel.rows, []any{int64(s.id), int64(s.id), x.in.serverTime(s.connected), "TCP", "TSQL",
				int64(int32(l.TDSVersion)), enc, auth, int64(l.PacketSize), cAddr, cPort, lAddr, lPort})
		}
	}
	sortRows(x.in.coll, rel.rows, 0)
	return rel, nil
}

// sessionRunning reports whether the session has a request in progress.
func (in *Instance) sessionRunning(id uint16) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	for r := range in.requests {
		if r.sessionID == int(id) {
			return true
		}
	}
	return false
}

// tcpParts splits a TCP address into host and port (NULLs for others).
func tcpParts(a net.Addr) (any, any) {
	t, ok := a.(*net.TCPAddr)
	if !ok || t == nil {
		return nil, nil
	}
	return t.IP.String(), int64(t.Port)
}
