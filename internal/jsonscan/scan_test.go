package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
)

var validityCases = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5`, `-1.5e10`, `1E+2`, `1e-2`, `true`, `false`, `null`,
	` { "a" : [ 1 , 2 , { } , [ ] ] , "b" : "x\"y\\z\/\b\f\n\r\t\u00e9\uD83D\uDE00" } `,
	"\t\r\n[1]\n",
	`{"a":1,"a":2}`,
	`"\ud800"`, // a lone surrogate is valid JSON
	"\"\xff\xfe\"",
	// invalid
	``, ` `, `{`, `}`, `[`, `]`, `{,}`, `[,]`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`,
	`{"a":1 "b":2}`, `[1 2]`, `[1}`, `{"a":1]`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`, `+1`,
	`"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\tb\"", `tru`, `nul`, `True`, `[true false]`,
	`{} {}`, `1 2`, `"a" "b"`, `[1]]`, `{"a":{"b":[1,{"c":}]}}`, "\xef\xbb\xbf{}",
	`NaN`, `Infinity`, `-Infinity`, `0x10`, `1_000`,
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range validityCases {
		if got, want := Valid([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid = %v", in, got, want)
		}
	}
}

func TestMaxDepth(t *testing.T) {
	for _, n := range []int{MaxDepth, MaxDepth + 1} {
		in := strings.Repeat("[", n) + strings.Repeat("]", n)
		if got, want := Valid([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("depth %d: Valid = %v, json.Valid = %v", n, got, want)
		}
	}
}

// TestWalk drives the Decoder the way the classifiers do: pick a few paths,
// skip the rest, and check the walk consumed exactly the whole input.
func TestWalk(t *testing.T) {
	in := []byte(`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi \u00e9"},"finish_reason":null}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":34,"f":1.5,"big":123456789012345678901},"\u0074ype":"t","ok":true}`)
	d := New(in)
	var content []byte
	var prompt, completion int64
	var sawType, ok bool
	if !d.Object() {
		t.Fatal("Object")
	}
	for {
		k, more := d.Key()
		if !more {
			break
		}
		switch string(k) {
		case "choices":
			d.Array()
			for d.Elem() {
				d.Object()
				for {
					k, more := d.Key()
					if !more {
						break
					}
					if string(k) != "delta" {
						d.Skip()
						continue
					}
					d.Object()
					for {
						k, more := d.Key()
						if !more {
							break
						}
						if string(k) == "content" {
							content, _ = d.Str()
						} else {
							d.Skip()
						}
					}
				}
			}
		case "usage":
			d.Object()
			for {
				k, more := d.Key()
				if !more {
					break
				}
				switch string(k) {
				case "prompt_tokens":
					prompt, _ = d.Int()
				case "completion_tokens":
					completion, _ = d.Int()
				case "f", "big":
					if _, isInt := d.Int(); isInt {
						t.Errorf("%s: Int reported an integer", k)
					}
				default:
					d.Skip()
				}
			}
		case "type":
			sawType = true
			d.Skip()
		case "ok":
			ok, _ = d.Bool()
		default:
			d.Skip()
		}
	}
	if !d.End() {
		t.Fatalf("walk did not end cleanly at %d (failed=%v)", d.Offset(), d.Failed())
	}
	if string(content) != `Hi \u00e9` || prompt != 12 || completion != 34 || !sawType || !ok {
		t.Errorf("content %q prompt %d completion %d type %v ok %v", content, prompt, completion, sawType, ok)
	}
	if got := string(AppendUnescaped(nil, content)); got != "Hi é" {
		t.Errorf("unescaped %q", got)
	}
}

func TestWrongCallFails(t *testing.T) {
	for _, tt := range []struct {
		in   string
		call func(*Decoder) bool
	}{
		{`"x"`, func(d *Decoder) bool { return d.Object() }},
		{`{}`, func(d *Decoder) bool { _, ok := d.Str(); return ok }},
		{`1`, func(d *Decoder) bool { _, ok := d.Bool(); return ok }},
		{`null`, func(d *Decoder) bool { _, ok := d.Int(); return ok }},
	} {
		d := New([]byte(tt.in))
		if tt.call(&d) || !d.Failed() {
			t.Errorf("%q: wrong call succeeded", tt.in)
		}
	}
	// StrOrNull accepts both.
	for _, in := range []string{`null`, `"a"`} {
		d := New([]byte(in))
		if _, ok := d.StrOrNull(); !ok || !d.End() {
			t.Errorf("StrOrNull(%s) failed", in)
		}
	}
}

func TestIdentUnescapes(t *testing.T) {
	d := New([]byte(`["\u0074ext_delta", "plain", "` + strings.Repeat(`\u0041`, 20) + `"]`))
	d.Array()
	var got []string
	for d.Elem() {
		b, _ := d.Ident()
		got = append(got, string(b))
	}
	if !d.End() || got[0] != "text_delta" || got[1] != "plain" || !strings.HasPrefix(got[2], `\u0041`) {
		t.Errorf("got %q", got)
	}
}

func TestHasNonSpace(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want bool
	}{
		{``, false},
		{` `, false},
		{`\n\n`, false},
		{` \t\r\n\f`, false},
		{`\u0020\u00a0\u3000`, false},
		{"\u00a0\u2028 ", false},
		{`a`, true},
		{` .`, true},
		{`\"`, true},
		{`\\`, true},
		{`\/`, true},
		{`\b`, true},
		{`\u00e9`, true},
		{`\uD83D\uDE00`, true},
		{`é`, true},
		{"\xff", true},
		{`\`, true},
		{`\u12`, true},
	} {
		if got := HasNonSpace([]byte(tt.raw)); got != tt.want {
			t.Errorf("HasNonSpace(%q) = %v, want %v", tt.raw, got, tt.want)
		}
	}
}

// TestHasNonSpaceMatchesDecoded checks the raw test against the decoded
// string for the escapes that matter.
func TestHasNonSpaceMatchesDecoded(t *testing.T) {
	for _, raw := range []string{` `, `\n`, `\u2003`, `\u200b`, `x`, `\ud800`, `\u0009\u000a`, `\u000b`} {
		var s string
		if err := json.Unmarshal([]byte(`"`+raw+`"`), &s); err != nil {
			t.Fatal(err)
		}
		if got, want := HasNonSpace([]byte(raw)), strings.TrimFunc(s, unicode.IsSpace) != ""; got != want {
			t.Errorf("HasNonSpace(%q) = %v, decoded %q says %v", raw, got, s, want)
		}
	}
}

func TestAppendUnescaped(t *testing.T) {
	for _, raw := range []string{
		``, `plain`, `a\"b\\c\/d\be\ff\ng\rh\ti`, `\u00e9\u4e2d\uD83D\uDE00`, `\ud800x`, `\udc00`, `\uD83D\u0041`,
		"\xff\xfe", `tail\u00`,
	} {
		got := string(AppendUnescaped(nil, []byte(raw)))
		var want string
		if err := json.Unmarshal([]byte(`"`+raw+`"`), &want); err != nil {
			// Not a valid string body: only check that it did not panic
			// and kept the bytes it could not decode.
			if !strings.HasSuffix(got, `\u00`) {
				t.Errorf("AppendUnescaped(%q) = %q", raw, got)
			}
			continue
		}
		if got != want {
			t.Errorf("AppendUnescaped(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	in := []byte(`{"a":[1,2,{"b":"c\u00e9"}],"\u0074":true,"n":null,"x":-1.5e3}`)
	n := testing.AllocsPerRun(100, func() {
		d := New(in)
		d.Object()
		for {
			k, ok := d.Key()
			if !ok {
				break
			}
			_ = k
			d.Skip()
		}
		if !d.End() {
			t.Fatal("not valid")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per walk, want 0", n)
	}
}

// TestNeedsAttention compares the eight-byte test with the byte table on
// words built around every interesting byte at every position.
func TestNeedsAttention(t *testing.T) {
	fill := []byte{'a', 0x7f, 0x80, 0xff, ' ', '!', '#', '[', ']', 0x21, 0xa2, 0xdc}
	for _, bg := range fill {
		for c := 0; c < 256; c++ {
			for pos := 0; pos < 8; pos++ {
				var b [8]byte
				for i := range b {
					b[i] = bg
				}
				b[pos] = byte(c)
				want := false
				for _, x := range b {
					want = want || special[x]
				}
				w := uint64(0)
				for i := 7; i >= 0; i-- {
					w = w<<8 | uint64(b[i])
				}
				if got := needsAttention(w); got != want {
					t.Fatalf("needsAttention(% x) = %v, want %v", b, got, want)
				}
			}
		}
	}
}

func TestInteger(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{`0`, 0, true}, {`-0`, 0, true}, {`0.0`, 0, true}, {`0e99999999999`, 0, true}, {`-0.000e-5`, 0, true},
		{`3`, 3, true}, {`3.0`, 3, true}, {`3.000`, 3, true}, {`1e1`, 10, true}, {`1E+1`, 10, true},
		{`1.5e2`, 150, true}, {`300e-2`, 3, true}, {`0.5e1`, 5, true}, {`-12`, -12, true}, {`-1.2e1`, -12, true},
		{`120e-1`, 12, true}, {`0.0012e4`, 12, true},
		{`9007199254740992`, 1 << 53, true}, {`9.007199254740992e15`, 1 << 53, true}, {`-9007199254740992`, -(1 << 53), true},
		// Not integers, or too large to be exact in a float64.
		{`2.5`, 0, false}, {`1e-1`, 0, false}, {`15e-1`, 0, false}, {`0.1`, 0, false}, {`3.0000000000000000001`, 0, false},
		{`9007199254740993`, 0, false}, {`1e16`, 0, false}, {`1e99999999999999999999`, 0, false}, {`1e-99999999999999`, 0, false},
		{`123456789012345678901`, 0, false},
	} {
		d := New([]byte(tt.in))
		got, ok := d.Integer()
		if got != tt.want || ok != tt.ok || !d.End() {
			t.Errorf("Integer(%s) = %d, %v (end %v); want %d, %v", tt.in, got, ok, d.End(), tt.want, tt.ok)
		}
	}
	for _, in := range []string{`"1"`, `null`, `[1]`} {
		d := New([]byte(in))
		if _, ok := d.Integer(); ok || !d.Failed() {
			t.Errorf("Integer(%s) did not fail", in)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		d := New([]byte(`1.5e2`))
		d.Integer()
	}); n != 0 {
		t.Errorf("Integer allocates %v times", n)
	}
}
