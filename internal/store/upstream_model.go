package store

import "github.com/ttfx/ttfx/internal/record"

// UpstreamModelArg is the stored upstream_model of r: the provider's name
// when the channel mapped the model asked to another (an alias), else ""
// — most records are served under the name asked, and the column then
// costs no bytes beyond its length (SPEC §7's bytes-per-record bounds).
func UpstreamModelArg(r *record.Record) string {
	if r.UpstreamModel == r.Model {
		return ""
	}
	return Clean(r.UpstreamModel, MaxNameLen)
}

// FillUpstreamModel restores what UpstreamModelArg left out: a record
// that reached a channel was served under the name asked. Records stored
// before the column existed read the same way, which is what they were.
func FillUpstreamModel(r *record.Record) {
	if r.UpstreamModel == "" && r.Channel != "" {
		r.UpstreamModel = r.Model
	}
}
