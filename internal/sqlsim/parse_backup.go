package sqlsim

import (
	"strings"
)

func (p *parser) devices() ([]expr, error) {
	var out []expr
	for {
		if !p.accept("DISK") {
			if p.peek().is("URL") || p.peek().is("TAPE") {
				return nil, errNotSupported(strings.ToUpper(p.peek().text) + " backup devices")
			}
			return nil, errNear(p.peek())
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		e, err := p.primary()
		if err != nil {
			return nil, err
		}
		switch e.(type) {
		case *litExpr, *varExpr:
		default:
			return nil, errNear(p.peek())
		}
		out = append(out, e)
		if !p.peek().isOp(",") || !p.peekAt(1).is("DISK") {
			return out, nil
		}
		p.next()
	}
}

// withOptions reads `WITH opt [= value], ...`; MOVE is collected apart, and
// so is BACKUP's ENCRYPTION (...) when enc is given. order lists the other
// options as given, repeats included.
func (p *parser) withOptions(moves *[]moveOpt, enc **encryptionSpec) (opts map[string]expr, order []string, err error) {
	opts = map[string]expr{}
	if !p.accept("WITH") {
		return opts, nil, nil
	}
	for {
		name, err := p.ident()
		if err != nil {
			return nil, nil, err
		}
		name = strings.ToUpper(name)
		if name != "MOVE" || moves == nil {
			order = append(order, name)
		}
		if name == "MOVE" && moves != nil {
			from, err := p.primary()
			if err != nil {
				return nil, nil, err
			}
			if err := p.expect("TO"); err != nil {
				return nil, nil, err
			}
			to, err := p.primary()
			if err != nil {
				return nil, nil, err
			}
			*moves = append(*moves, moveOpt{logical: from, to: to})
		} else if name == "ENCRYPTION" && enc != nil && p.peek().isOp("(") {
			if *enc, err = p.parseEncryption(); err != nil {
				return nil, nil, err
			}
			opts[name] = nil
		} else if p.acceptOp("=") {
			v, err := p.unary()
			if err != nil {
				return nil, nil, err
			}
			opts[name] = v
		} else {
			opts[name] = nil
		}
		if !p.acceptOp(",") {
			return opts, order, nil
		}
	}
}

func (p *parser) backupStmt() (stmt, error) {
	p.next()
	log := p.accept("LOG")
	if !log && !p.accept("DATABASE") {
		return nil, errNotSupported("BACKUP " + strings.ToUpper(p.peek().text))
	}
	db, err := p.nameOrExpr()
	if err != nil {
		return nil, err
	}
	if err := p.expect("TO"); err != nil {
		return nil, err
	}
	s := &backupStmt{db: db, log: log}
	if s.disks, err = p.devices(); err != nil {
		return nil, err
	}
	if p.peek().is("MIRROR") {
		return nil, errNotSupported("MIRROR TO")
	}
	if s.opts, s.order, err = p.withOptions(nil, &s.enc); err != nil {
		return nil, err
	}
	return s, nil
}

func (p *parser) restoreStmt() (stmt, error) {
	p.next()
	kw := strings.ToUpper(p.peek().text)
	s := &restoreStmt{kind: kw}
	switch kw {
	case "DATABASE", "LOG":
		p.next()
		db, err := p.nameOrExpr()
		if err != nil {
			return nil, err
		}
		s.db = db
		if kw == "DATABASE" && p.peek().is("WITH") {
			// RESTORE DATABASE d WITH RECOVERY: no FROM (restorelog.go).
			var err error
			s.opts, s.order, err = p.withOptions(nil, nil)
			return s, err
		}
	case "FILELISTONLY", "HEADERONLY", "VERIFYONLY", "LABELONLY":
		p.next()
	default:
		return nil, errNotSupported("RESTORE " + kw)
	}
	if err := p.expect("FROM"); err != nil {
		return nil, err
	}
	var err error
	if s.disks, err = p.devices(); err != nil {
		return nil, err
	}
	if s.opts, s.order, err = p.withOptions(&s.moves, nil); err != nil {
		return nil, err
	}
	return s, nil
}

func (p *parser) dbccStmt() (stmt, error) {
	p.next()
	cmd, err := p.ident()
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(cmd, "CHECKDB") {
		return nil, errNotSupported("DBCC " + strings.ToUpper(cmd))
	}
	s := &dbccStmt{}
	if p.acceptOp("(") {
		if !p.peek().isOp(")") {
			t := p.peek()
			if t.kind == tNumber {
				return nil, errNotSupported("DBCC CHECKDB by database id")
			}
			if s.db, err = p.nameOrExpr(); err != nil {
				return nil, err
			}
			if p.acceptOp(",") {
				opt, err := p.ident()
				if err != nil {
					return nil, err
				}
				if !strings.EqualFold(opt, "NOINDEX") {
					return nil, errNotSupported("DBCC CHECKDB repair options")
				}
			}
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	if p.accept("WITH") {
		for {
			o, err := p.ident()
			if err != nil {
				return nil, err
			}
			o = strings.ToUpper(o)
			switch o {
			case "NO_INFOMSGS", "ALL_ERRORMSGS", "EXTENDED_LOGICAL_CHECKS", "DATA_PURITY", "PHYSICAL_ONLY", "TABLOCK", "ESTIMATEONLY":
			default:
				return nil, errNear(p.toks[p.i-1])
			}
			s.opts = append(s.opts, o)
			if !p.acceptOp(",") {
				break
			}
		}
	}
	return s, nil
}

func (p *parser) dropStmt() (stmt, error) {
	p.next()
	if p.accept("USER") {
		s := &dropUserStmt{}
		if p.peek().is("IF") && p.peekAt(1).is("EXISTS") {
			p.next()
			p.next()
			s.ifExists = true
		}
		var err error
		s.name, err = p.ident()
		return s, err
	}
	if !p.accept("DATABASE") {
		return nil, errNotSupported("DROP " + strings.ToUpper(p.peek().text))
	}
	s := &dropDBStmt{}
	if p.peek().is("IF") && p.peekAt(1).is("EXISTS") {
		p.next()
		p.next()
		s.ifExists = true
	}
	for {
		e, err := p.nameOrExpr()
		if err != nil {
			return nil, err
		}
		s.names = append(s.names, e)
		if !p.acceptOp(",") {
			return s, nil
		}
	}
}
