package sqlsim

import (
	"strings"
	"time"
)

func (e *env) call(f *funcExpr) (any, error) {
	x := e.x
	// A schema-qualified call is a user-defined function, except in the
	// sys schema, which holds the system functions (sys.fn_hadr_...) and
	// where no user creates one ("System functions for Transact-SQL",
	// https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/system-functions-for-transact-sql).
	if len(f.parts) > 1 && !(len(f.parts) == 2 && strings.EqualFold(f.parts[0], "sys")) {
		return x.callFunction(f)
	}
	switch f.name {
	case "DB_ID":
		if len(f.args) == 0 {
			return int64(x.currentDB().ID), nil
		}
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		if d := x.in.lookupDB(toString(v)); d != nil {
			return int64(d.ID), nil
		}
		return nil, nil
	case "DB_NAME":
		if len(f.args) == 0 {
			return x.currentDB().Name, nil
		}
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		id, _ := normValue(v).(int64)
		if d := x.in.dbByID(int(id)); d != nil {
			return d.Name, nil
		}
		return nil, nil
	case "OBJECT_ID":
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		return x.objectID(toString(v))
	case "SCHEMA_ID":
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		md, err := x.in.readMetadata(x.currentDB())
		if err != nil {
			return nil, err
		}
		for i, s := range md.Schemas {
			if strings.EqualFold(s, toString(v)) {
				return int64(i + 1), nil
			}
		}
		return nil, nil
	case "DATABASEPROPERTYEX":
		v, err := e.arg(f, 0)
		if err != nil {
			return nil, err
		}
		pv, err := e.arg(f, 1)
		if err != nil || v == nil || pv == nil {
			return nil, err
		}
		for _, d := range x.in.allDatabases() {
			if x.in.sameName(d.Name, toString(v)) {
				if strings.EqualFold(toString(pv), "Updateability") && x.in.secondary(&d) {
					return "READ_ONLY", nil // a secondary database takes no writes (ag.go)
				}
				return databaseProperty(d, toString(pv), x.in.cfg.Collation), nil
			}
		}
		return nil, nil
	case "SYS.FN_HADR_BACKUP_IS_PREFERRED_REPLICA":
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		return x.in.preferredBackupReplica(toString(v)) == 1, nil
	case "SYS.FN_HADR_IS_PRIMARY_REPLICA":
		// 1 on the primary, 0 on a secondary, NULL for a database that
		// does not exist or is not in a group; VIEW SERVER STATE
		// (https://learn.microsoft.com/en-us/sql/relational-databases/system-functions/sys-fn-hadr-is-primary-replica-transact-sql).
		if err := x.serverStateDenied(); err != nil {
			return nil, err
		}
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		if s, ok := x.in.agOf(toString(v)); ok && x.in.lookupDB(toString(v)) != nil {
			return s.primary, nil
		}
		return nil, nil
	case "SERVERPROPERTY":
		v, err := e.arg(f, 0)
		if err != nil {
			return nil, err
		}
		return x.in.serverProperty(toString(v)), nil
	case "GETDATE", "SYSDATETIME", "CURRENT_TIMESTAMP":
		return x.in.serverTime(time.Now()), nil // the server's wall clock
	case "GETUTCDATE", "SYSUTCDATETIME":
		return time.Now().UTC(), nil
	case "SUSER_SNAME", "SUSER_NAME", "ORIGINAL_LOGIN":
		// Under EXECUTE AS USER the server principal of the context (a
		// user without login has its SID, S-1-9-3-...); ORIGINAL_LOGIN is
		// always the login that connected.
		if l := x.impersonated(); l != nil && f.name != "ORIGINAL_LOGIN" {
			return l.Name, nil
		}
		// The login's name as defined on the server, whatever case the
		// client typed it in.
		return x.in.loginName(x.s.login.User), nil
	case "SUSER_SID":
		// The session's login, or the login named by the argument
		// (https://learn.microsoft.com/en-us/sql/t-sql/functions/suser-sid-transact-sql).
		name := x.s.login.User
		if len(f.args) > 0 {
			v, err := e.arg(f, 0)
			if err != nil || v == nil {
				return nil, err
			}
			name = toString(v)
		}
		if sid := x.in.loginSIDByName(name); sid != nil {
			return append([]byte(nil), sid...), nil
		}
		return nil, nil
	case "USER_NAME", "CURRENT_USER":
		if l := x.impersonated(); l != nil && l.dbPrincipal {
			return l.user, nil
		}
		if x.in.isDBOwner(x.sessionLogin(), x.currentDB()) {
			return "dbo", nil
		}
		return x.s.login.User, nil
	case "DATABASE_PRINCIPAL_ID":
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		return x.databasePrincipalID(toString(v))
	case "HAS_PERMS_BY_NAME":
		var args [3]any
		for i := range args {
			v, err := e.arg(f, i)
			if err != nil {
				return nil, err
			}
			args[i] = v
		}
		return x.hasPermsByName(args[0], args[1], args[2])
	case "IS_SRVROLEMEMBER", "IS_MEMBER":
		role, err := e.arg(f, 0)
		if err != nil {
			return nil, err
		}
		if f.name == "IS_MEMBER" {
			return x.isMember(role), nil
		}
		var login any
		if len(f.args) > 1 {
			if login, err = e.arg(f, 1); err != nil {
				return nil, err
			}
		}
		return x.isSrvRoleMember(role, login), nil
	case "HOST_NAME":
		return x.s.login.HostName, nil
	case "APP_NAME":
		return x.s.login.AppName, nil
	case "ISNULL", "COALESCE":
		for i := range f.args {
			v, err := e.eval(f.args[i])
			if err != nil {
				return nil, err
			}
			if v != nil {
				return v, nil
			}
		}
		return nil, nil
	case "LEN", "UPPER", "LOWER", "LTRIM", "RTRIM", "QUOTENAME":
		v, err := e.arg(f, 0)
		if err != nil || v == nil {
			return nil, err
		}
		s := toString(v)
		switch f.name {
		case "LEN":
			return int64(len([]rune(strings.TrimRight(s, " ")))), nil
		case "UPPER":
			return strings.ToUpper(s), nil
		case "LOWER":
			return strings.ToLower(s), nil
		case "LTRIM":
			return strings.TrimLeft(s, " "), nil
		case "RTRIM":
			return strings.TrimRight(s, " "), nil
		}
		return "[" + strings.ReplaceAll(s, "]", "]]") + "]", nil
	case "RIGHT", "LEFT":
		v, err := e.arg(f, 0)
		if err != nil {
			return nil, err
		}
		nv, err := e.arg(f, 1)
		if err != nil || v == nil || nv == nil {
			return nil, err
		}
		r := []rune(toString(v))
		n, _ := normValue(nv).(int64)
		n = min(max(n, 0), int64(len(r)))
		if f.name == "LEFT" {
			return string(r[:n]), nil
		}
		return string(r[int64(len(r))-n:]), nil
	}
	return nil, sqlErr(195, 15, "'%s' is not a recognized built-in function name.", strings.ToLower(f.name))
}
