package rollup

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sketch"
	"github.com/ttfx/ttfx/internal/store"
)

// LabelCounts counts diagnosis labels: at any position and as the primary
// verdict.
type LabelCounts map[string]store.LabelCount

func (l LabelCounts) Add(o LabelCounts) {
	for k, v := range o {
		c := l[k]
		c.Count += v.Count
		c.Primary += v.Primary
		l[k] = c
	}
}

// EncodeLabels writes label counts as "label=count/primary" joined by
// commas, sorted by label: a row is read far more often than it is
// written, and this parses several times faster than JSON. Diagnosis labels
// are identifiers of lower-case letters and underscores (rule labels and
// terminal statuses); a label with any other character cannot be written
// here and is left out rather than corrupt the row.
func EncodeLabels(l LabelCounts) string {
	if len(l) == 0 {
		return ""
	}
	names := make([]string, 0, len(l))
	for k := range l {
		if k != "" && !strings.ContainsAny(k, ",=/") {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		c := l[k]
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(c.Count))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(c.Primary))
	}
	return b.String()
}

// AddLabels adds what EncodeLabels wrote to l, skipping malformed parts.
func AddLabels(l LabelCounts, s string) {
	for s != "" {
		var part string
		part, s, _ = strings.Cut(s, ",")
		name, counts, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		cs, ps, ok := strings.Cut(counts, "/")
		if !ok {
			continue
		}
		c, err1 := strconv.Atoi(cs)
		p, err2 := strconv.Atoi(ps)
		if err1 != nil || err2 != nil {
			continue
		}
		v := l[name]
		v.Count += c
		v.Primary += p
		l[name] = v
	}
}

// Cell is the summary of one rollup row: its records' count, their
// count per terminal status, labels and one sketch per StatFields entry
// (nil while no value was added).
type Cell struct {
	Count    int64
	Statuses map[string]int64
	Labels   LabelCounts
	Sketches []*sketch.Sketch
}

func NewCell() *Cell {
	return &Cell{Statuses: map[string]int64{}, Labels: LabelCounts{}, Sketches: make([]*sketch.Sketch, len(store.StatFields))}
}

// add adds one record.
func (c *Cell) Add(r *record.Record) {
	c.Count++ // a minute row's status is in its key: statuses stay for compaction to fill
	for i, l := range r.Diagnosis[:min(len(r.Diagnosis), store.MaxLabels)] {
		l = store.Clean(l, store.MaxNameLen)
		v := c.Labels[l]
		v.Count++
		if i == 0 {
			v.Primary++
		}
		c.Labels[l] = v
	}
	for i := range store.StatFields {
		if v, ok := store.StatFields[i].Of(r); ok {
			if c.Sketches[i] == nil {
				c.Sketches[i] = new(sketch.Sketch)
			}
			c.Sketches[i].Add(v)
		}
	}
}

// MergeRow adds a stored row's summary: its count, of status (a row keyed
// by status) or of the statuses its statuses column counts (a row of a
// projection without the status), labels and encoded sketches.
func (c *Cell) MergeRow(status string, count int64, statuses, labels string, sketches [][]byte) error {
	c.Count += count
	if statuses != "" {
		AddStatuses(c.Statuses, statuses)
	} else {
		c.Statuses[status] += count
	}
	AddLabels(c.Labels, labels)
	for i, b := range sketches {
		if len(b) == 0 {
			continue
		}
		if c.Sketches[i] == nil {
			c.Sketches[i] = new(sketch.Sketch)
		}
		if err := c.Sketches[i].MergeBinary(b); err != nil {
			return fmt.Errorf("rollup field %s: %w", store.StatFields[i].Name, err)
		}
	}
	return nil
}

// merge adds o's summary to c.
func (c *Cell) Merge(o *Cell) {
	c.Count += o.Count
	for k, n := range o.Statuses {
		c.Statuses[k] += n
	}
	c.Labels.Add(o.Labels)
	for i, sk := range o.Sketches {
		if sk == nil {
			continue
		}
		if c.Sketches[i] == nil {
			c.Sketches[i] = sk.Clone() // no padded window: most projected cells merge one or two
			continue
		}
		c.Sketches[i].Merge(sk)
	}
}

// statusEscaper keeps the separators of the statuses column out of a
// status: terminal statuses are identifiers, but a record's status is
// stored as it came.
var statusEscaper, statusUnescaper = strings.NewReplacer("%", "%25", ",", "%2C", "=", "%3D"),
	strings.NewReplacer("%25", "%", "%2C", ",", "%3D", "=")

// EncodeStatuses writes per-status counts as "status=count" joined by
// commas, sorted by status.
func EncodeStatuses(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(statusEscaper.Replace(k))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(m[k], 10))
	}
	return b.String()
}

// EachStatus calls fn with each status and count that EncodeStatuses
// wrote in s, skipping malformed parts. The status is only valid during
// the call.
func EachStatus(s string, fn func(status string, n int64)) {
	for s != "" {
		var part string
		part, s, _ = strings.Cut(s, ",")
		name, ns, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			continue
		}
		if strings.IndexByte(name, '%') >= 0 {
			name = statusUnescaper.Replace(name)
		}
		fn(name, n)
	}
}

// AddStatuses adds what EncodeStatuses wrote to m.
func AddStatuses(m map[string]int64, s string) {
	EachStatus(s, func(status string, n int64) { m[status] += n })
}
