package tokens

import "testing"

func TestCount(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"Hello", 1},
		{"Hello world", 2},
		{" the quick brown fox", 4},
	}
	for _, tt := range tests {
		if got := Count(tt.text); got != tt.want {
			t.Errorf("Count(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	const s = "Streams are relayed byte for byte."
	if got := Decode(Encode(s)); got != s {
		t.Fatalf("Decode(Encode(%q)) = %q", s, got)
	}
}
