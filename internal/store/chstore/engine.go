// Package chstore keeps request records in ClickHouse, behind the same
// Store contract as internal/store/sqlstore with a schema of its own
// (migrations/): one ReplacingMergeTree row per request with its attempts
// and labels as arrays, partitioned by day and sorted by time, then group,
// channel and model. Summaries come from the same rollups as on the SQL
// engines (per-minute sketches compacted to coarser units and projections,
// see internal/store/rollup), stored in a ReplacingMergeTree and merged in
// Go by the same code. Retention drops whole day partitions.
//
// Its SQL keeps to what ClickHouse 18.16 — Debian's package — accepts, and
// nothing removed since.
//
// Importing the package registers the "clickhouse" engine
// (clickhouse://user:pass@host:9000/db, the native protocol) with
// internal/store.
package chstore

import (
	"errors"

	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"github.com/ttfx/ttfx/internal/store"
)

func init() {
	store.Register(store.Engine{
		Name:          "clickhouse",
		Schemes:       []string{"clickhouse://"},
		Open:          openClickHouse,
		Server:        true,
		DataFault:     dataFault,
		BatchSize:     clickhouseBatchSize,
		FlushInterval: clickhouseFlushInterval,
	})
}

// dataCodes are the ClickHouse error codes that say a value could not be
// stored as given (ErrorCodes.cpp; the same numbers in 18.16 and today).
var dataCodes = map[int32]string{
	6:   "CANNOT_PARSE_TEXT",
	27:  "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
	53:  "TYPE_MISMATCH",
	69:  "ARGUMENT_OUT_OF_BOUND",
	70:  "CANNOT_CONVERT_TYPE",
	72:  "CANNOT_PARSE_NUMBER",
	117: "INCORRECT_DATA",
	131: "TOO_LARGE_STRING_SIZE",
	349: "CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN",
}

// dataFault reports an exception that names the data (dataCodes), or a
// value the driver could not convert to its column's type.
func dataFault(err error) bool {
	if _, ok := dataCodes[chCode(err)]; ok {
		return true
	}
	var conv *chcolumn.ColumnConverterError
	return errors.As(err, &conv)
}
