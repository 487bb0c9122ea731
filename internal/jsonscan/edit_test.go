package jsonscan

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
)

func TestEditObject(t *testing.T) {
	for in, want := range map[string]string{
		`{"model":"m","max_tokens":5,"messages":[]}`:            `{"max_tokens":5,"messages":[],"anthropic_version":"v"}`,
		`{"max_tokens":5,"model":"m"}`:                          `{"max_tokens":5,"anthropic_version":"v"}`,
		` { "a" : {"model":1} , "model" : "m" , "b":[1,"}"] } `: ` {"a" : {"model":1},"b":[1,"}"],"anthropic_version":"v"} `,
		`{}`:                            `{"anthropic_version":"v"}`,
		`{"model":"m"}`:                 `{"anthropic_version":"v"}`,
		`{"anthropic_version":"x"}`:     `{"anthropic_version":"x"}`,
		`{"mod\u0065l":"m","s":"a\"b"}`: `{"s":"a\"b","anthropic_version":"v"}`,
	} {
		got, err := EditObject([]byte(in), "anthropic_version", `"v"`, "model")
		if err != nil || string(got) != want {
			t.Errorf("EditObject(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{``, `[]`, `"x"`, `{"a":1`, `{"a" 1}`, `{"a":1}x`, `{"a":}`, `{a:1}`} {
		if got, err := EditObject([]byte(in), "anthropic_version", `"v"`, "model"); err == nil {
			t.Errorf("EditObject(%s) = %s, want an error", in, got)
		}
	}
}

// FuzzEditObject: for every JSON object, the edit is a JSON object with
// the same members but model and stream, and anthropic_version; nothing panics on
// other bytes.
func FuzzEditObject(f *testing.F) {
	for _, s := range []string{`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, `{"stream":false,"model":"m"}`, `{}`, ` {"a":[{"b":"\"}"}]} `, `{"model":1,"model":2}`, `{"x":1e5,"y":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := EditObject(b, "anthropic_version", `"v"`, "model", "stream")
		var in map[string]json.RawMessage
		if json.Unmarshal(b, &in) != nil || in == nil || !json.Valid(b) {
			return // not an object: an error or a result, never a panic
		}
		if err != nil {
			t.Fatalf("EditObject(%q): %v", b, err)
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(got, &out); err != nil {
			t.Fatalf("EditObject(%q) = %q: %v", b, got, err)
		}
		want := maps.Clone(in)
		delete(want, "model")
		delete(want, "stream")
		if _, ok := want["anthropic_version"]; !ok {
			want["anthropic_version"] = json.RawMessage(`"v"`)
		}
		if !maps.EqualFunc(out, want, func(a, b json.RawMessage) bool { return bytes.Equal(compact(a), compact(b)) }) {
			t.Fatalf("EditObject(%q) = %q", b, got)
		}
	})
}

func compact(b []byte) []byte {
	var w bytes.Buffer
	json.Compact(&w, b)
	return w.Bytes()
}
