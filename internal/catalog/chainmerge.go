package catalog

import (
	"slices"
	"sort"
	"strings"

	"github.com/backupcycle/backupcycle/internal/logchain"
)

// chainLogRank orders a log backup's states by how far it got.
var chainLogRank = map[LogState]int{LogPending: 0, LogFailed: 1, LogWritten: 2, LogCopied: 3}

// MergeChainPart is one part of a chain as the servers that hold it know
// it together: the chain's server writes each log backup first and the
// copy target gets its proof first, so neither copy alone is the whole
// story. Each log backup comes from the copy that got furthest, proven when
// any copy says so; the fulls and the break any copy records. rs are
// copies of one part (same chain and part), trusted, at least one.
func MergeChainPart(rs []*ChainRecord) *ChainRecord {
	m := *rs[0]
	m.Logs = slices.Clone(rs[0].Logs)
	m.Fulls = slices.Clone(rs[0].Fulls)
	for _, r := range rs[1:] {
		for _, l := range r.Logs {
			i := slices.IndexFunc(m.Logs, func(x LogBackup) bool { return x.Number == l.Number })
			switch {
			case i < 0:
				m.Logs = append(m.Logs, l)
			default:
				proven := m.Logs[i].Proven
				if chainLogRank[l.State] > chainLogRank[m.Logs[i].State] {
					m.Logs[i] = l
				}
				if m.Logs[i].Proven == nil {
					m.Logs[i].Proven = proofOr(l.Proven, proven)
				}
			}
		}
		for _, f := range r.Fulls {
			if !slices.ContainsFunc(m.Fulls, func(x ChainFull) bool { return strings.EqualFold(x.BackupSetGUID, f.BackupSetGUID) }) {
				m.Fulls = append(m.Fulls, f)
			}
		}
		if m.Break == nil {
			m.Break = r.Break
		}
	}
	sort.Slice(m.Logs, func(i, j int) bool { return m.Logs[i].Number < m.Logs[j].Number })
	sort.SliceStable(m.Fulls, func(i, j int) bool {
		return logchain.LSN(m.Fulls[i].LastLSN).Less(logchain.LSN(m.Fulls[j].LastLSN))
	})
	return &m
}

func proofOr(a, b *LogProof) *LogProof {
	if a != nil {
		return a
	}
	return b
}
