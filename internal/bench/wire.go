package bench

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/ttfx/ttfx/internal/bench/request"
)

// Wire builds the requests of a run in the wire format of its API
// (request.Wire).
type Wire = request.Wire

// Sampling is the sampling settings of a run (request.Sampling).
type Sampling = request.Sampling

// LoadTools reads a JSON file holding an array of tool definitions in the
// API's own format and describes it for the conditions. The definitions
// are sent as they are (compacted).
func LoadTools(name string, data []byte) (json.RawMessage, *Tools, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, nil, fmt.Errorf("tools %s: want a JSON array of tool definitions: %w", name, err)
	}
	if len(list) == 0 {
		return nil, nil, fmt.Errorf("tools %s: the array is empty", name)
	}
	t := &Tools{File: filepath.Base(name), Count: len(list)}
	for i, raw := range list {
		var def struct {
			Name     string `json:"name"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		}
		if err := json.Unmarshal(raw, &def); err != nil {
			return nil, nil, fmt.Errorf("tools %s: element %d is not an object: %w", name, i, err)
		}
		switch {
		case def.Function != nil && def.Function.Name != "":
			t.Names = append(t.Names, def.Function.Name)
		case def.Name != "":
			t.Names = append(t.Names, def.Name)
		case len(def.FunctionDeclarations) > 0:
			for _, d := range def.FunctionDeclarations {
				t.Names = append(t.Names, d.Name)
			}
		default:
			t.Names = append(t.Names, "")
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, nil, fmt.Errorf("tools %s: %w", name, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	t.SHA256 = hex.EncodeToString(sum[:])
	return json.RawMessage(buf.Bytes()), t, nil
}
