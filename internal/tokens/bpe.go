package tokens

// Byte-pair merging, as tiktoken does it: a piece that is not itself a
// token starts as single bytes, and the adjacent pair whose joined bytes
// have the lowest rank merges first (the leftmost of equal ranks), until no
// adjacent pair is a token.

// longPiece is the length from which a piece is merged with a heap rather
// than by scanning every pair after each merge (quadratic in the piece).
const longPiece = 96

// pieceTokens calls each with the bytes of every token of piece, in order.
func (v *vocab) pieceTokens(piece string, each func(tok string)) {
	switch {
	case len(piece) == 1:
		each(piece) // every byte is a token
	case len(piece) <= maxTokenLen && v.has(piece):
		each(piece)
	case len(piece) < longPiece:
		v.mergeShort(piece, each)
	default:
		v.mergeLong(piece, each)
	}
}

func (v *vocab) has(s string) bool {
	_, ok := v.rank(s)
	return ok
}

// noRank is the rank of a pair that is not a token.
const noRank = ^uint32(0)

// pairRank is the rank of s, or noRank.
func (v *vocab) pairRank(s string) uint32 {
	if r, ok := v.rank(s); ok {
		return r
	}
	return noRank
}

// mergeShort merges a piece shorter than longPiece by scanning its pairs,
// on the stack.
func (v *vocab) mergeShort(piece string, each func(tok string)) {
	type part struct {
		start int32
		rank  uint32 // of this part joined with the next
	}
	var buf [longPiece + 1]part
	parts := buf[:len(piece)+1]
	for i := range parts {
		parts[i] = part{int32(i), noRank}
	}
	// rankAt is the rank of part i joined with the next, once
	// part i+1 is gone (when part i+2 exists).
	rankAt := func(i int) uint32 {
		if i+2 < len(parts) {
			return v.pairRank(piece[parts[i].start:parts[i+2].start])
		}
		return noRank
	}
	for i := 0; i+2 < len(parts); i++ {
		parts[i].rank = v.pairRank(piece[i : i+2])
	}
	for {
		low, at := noRank, 0
		for i, p := range parts[:len(parts)-1] {
			if p.rank < low {
				low, at = p.rank, i
			}
		}
		if low == noRank {
			break
		}
		parts = append(parts[:at+1], parts[at+2:]...)
		parts[at].rank = rankAt(at)
		if at > 0 {
			parts[at-1].rank = rankAt(at - 1)
		}
	}
	for i := 0; i+1 < len(parts); i++ {
		each(piece[parts[i].start:parts[i+1].start])
	}
}

// mergeLong merges a long piece with a heap of candidate pairs ordered by
// (rank, start), which is the order mergeShort picks them in: O(n log n)
// for a piece of n bytes, where an upstream's 64 KiB run of letters with
// no space would cost mergeShort's loop billions of steps.
func (v *vocab) mergeLong(piece string, each func(tok string)) {
	n := int32(len(piece))
	// Parts are linked by their start offsets; next[n] ends the list, and a
	// merged-away part's next is -1.
	next := make([]int32, n+1)
	prev := make([]int32, n+1)
	for i := range next {
		next[i], prev[i] = int32(i)+1, int32(i)-1
	}
	var h pairHeap
	for i := int32(0); i+2 <= n; i++ {
		if r := v.pairRank(piece[i : i+2]); r != noRank {
			h.push(pair{r, i, i + 2})
		}
	}
	for len(h) > 0 {
		p := h.pop()
		a := p.start
		b := next[a]
		if b < 0 || b >= n || next[b] != p.end {
			continue // a or its pair merged since this was pushed
		}
		c := p.end
		next[a], next[b], prev[c] = c, -1, a
		if c < n {
			if r := v.pairRank(piece[a:next[c]]); r != noRank {
				h.push(pair{r, a, next[c]})
			}
		}
		if a > 0 {
			z := prev[a]
			if r := v.pairRank(piece[z:c]); r != noRank {
				h.push(pair{r, z, c})
			}
		}
	}
	for i := int32(0); i < n; i = next[i] {
		each(piece[i:next[i]])
	}
}

// pair is two adjacent parts from start to end that would merge into the
// token of rank.
type pair struct {
	rank       uint32
	start, end int32
}

func (p pair) less(q pair) bool {
	return p.rank < q.rank || p.rank == q.rank && p.start < q.start
}

// pairHeap is a binary min-heap of pairs.
type pairHeap []pair

func (h *pairHeap) push(p pair) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if !s[i].less(s[up]) {
			break
		}
		s[i], s[up] = s[up], s[i]
		i = up
	}
}

func (h *pairHeap) pop() pair {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		low := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(s) && s[c].less(s[low]) {
				low = c
			}
		}
		if low == i {
			break
		}
		s[i], s[low] = s[low], s[i]
		i = low
	}
	*h = s
	return top
}
