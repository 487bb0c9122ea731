package chstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// A store over a ClickHouse cluster: clickhouse://node:9000/ttfx?cluster=NAME
// names a cluster of the node's remote_servers. Every node of the cluster
// then holds the schema's tables in a local database (local_database=, by
// default the DSN's database with "_local"), made and migrated by ttfx as on
// one server, and the DSN's database holds a Distributed table over them
// for each, made by ttfx on every node: inserts go through the Distributed
// tables (insert_distributed_sync=1, so that an insert returns only once
// every shard holds its rows, and a shard that is down fails it, to be
// retried whole like any store outage) and so do reads. What ClickHouse
// does per node — dropping a day's partition, merging a closed day's
// rollups, telling the parts' bytes — ttfx does on each node's local
// tables itself: on 18.16, ON CLUSTER DDL needs ZooKeeper.
//
// The nodes are every host the cluster names, each taken as a shard of its
// own: ttfx makes plain (Replacing)MergeTree local tables. Replicated local
// tables are made by hand (docs/scale.md); ttfx's CREATE TABLE IF NOT
// EXISTS leaves them as they are.

// The DSN options that are ttfx's own, not clickhouse-go's.
const (
	dsnCluster       = "cluster"
	dsnLocalDatabase = "local_database"
)

// chShardKeys are the tables of the schema that a cluster shares, each with
// the expression its Distributed table shards rows by. A row written twice
// (a batch retried) must land on the shard that holds its first copy, so
// that the ReplacingMergeTree there keeps it once: records and their ids
// by request id; rollups by their unit and writer (a minute row's writer
// is its batch token; a compacted row's is ”, so that a unit compacted
// again replaces its rows on the shard that holds them, and units spread
// over the shards); marks by their unit; channel states by channel. A table not named here fails the open of a
// cluster store: a migration that adds one must say how it is sharded.
var chShardKeys = map[string]string{
	"requests":           "cityHash64(request_id)",
	"request_ids":        "cityHash64(request_id)",
	"rollups":            "cityHash64(level, start_ns, writer)",
	"rollup_marks":       "cityHash64(level, start_ns)",
	"channel_states":     "cityHash64(channel)",
	"channel_state_acks": "cityHash64(replica, channel)",
}

// chCluster is a cluster store's layout.
type chCluster struct {
	name  string   // the cluster, in remote_servers
	dist  string   // the Distributed tables' database (the DSN's)
	local string   // the local tables' database on every node
	nodes []chNode // every host of the cluster, in shard order
}

// chNode is one node of a cluster and a pool on its local database.
type chNode struct {
	addr string
	db   *sql.DB
}

func (c *chCluster) close() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.db.Close())
	}
	return errors.Join(errs...)
}

// splitDSN takes ttfx's own options out of a ClickHouse DSN: the rest is
// clickhouse-go's, which sends options it does not know to the server as
// settings.
func splitDSN(dsn string) (rest, cluster, local string, err error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", "", err
	}
	q := u.Query()
	cluster, local = q.Get(dsnCluster), q.Get(dsnLocalDatabase)
	if !q.Has(dsnCluster) && !q.Has(dsnLocalDatabase) {
		return dsn, "", "", nil
	}
	if cluster == "" {
		return "", "", "", fmt.Errorf("%s= names no cluster", dsnCluster)
	}
	q.Del(dsnCluster)
	q.Del(dsnLocalDatabase)
	u.RawQuery = q.Encode()
	return u.String(), cluster, local, nil
}

// chIdent matches the names ttfx puts into DDL unquoted: databases and
// clusters.
var chIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// openCluster finds the nodes of cluster name from the node opts names,
// makes both databases on every node when missing, migrates every node's
// local tables and then makes or remakes every node's Distributed tables
// to match them.
func openCluster(ctx context.Context, opts *clickhouse.Options, name, local string) (*chCluster, error) {
	dist := opts.Auth.Database
	if local == "" {
		local = dist + "_local"
	}
	for _, id := range []string{name, dist, local} {
		if !chIdent.MatchString(id) {
			return nil, fmt.Errorf("cluster: %q is not a name ttfx takes for a cluster or database (letters, digits, _)", id)
		}
	}
	if local == dist {
		return nil, fmt.Errorf("cluster: the local tables need a database other than %s (%s=)", dist, dsnLocalDatabase)
	}
	c := &chCluster{name: name, dist: dist, local: local}
	hosts, err := clusterHosts(ctx, opts, name)
	if err != nil {
		return nil, err
	}
	for _, addr := range hosts {
		db, err := openNode(ctx, opts, addr, dist, local)
		if err != nil {
			c.close()
			return nil, err
		}
		c.nodes = append(c.nodes, chNode{addr: addr, db: db})
	}
	// Every node's local tables first: a Distributed table is made from
	// its own node's local table and reads every other node's.
	for _, n := range c.nodes {
		if err := chMigrate(ctx, n.db); err != nil {
			c.close()
			return nil, fmt.Errorf("cluster node %s: %w", n.addr, err)
		}
	}
	for _, n := range c.nodes {
		if err := c.syncDistributed(ctx, n); err != nil {
			c.close()
			return nil, fmt.Errorf("cluster node %s: %w", n.addr, err)
		}
	}
	return c, nil
}

// clusterHosts returns the host:port of every node of cluster name, as the
// node opts names knows them.
func clusterHosts(ctx context.Context, opts *clickhouse.Options, name string) ([]string, error) {
	o := *opts
	o.Auth.Database = "system"
	db := clickhouse.OpenDB(&o)
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT host_name, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", name)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	defer rows.Close()
	var hosts []string
	for rows.Next() {
		var host string
		var port uint16
		if err := rows.Scan(&host, &port); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		hosts = append(hosts, net.JoinHostPort(host, strconv.Itoa(int(port))))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("cluster %s: the server at %s has no such cluster in its remote_servers", name, strings.Join(opts.Addr, ","))
	}
	return hosts, nil
}

// openNode makes databases dist and local on the node at addr when
// missing and returns a pool on local.
func openNode(ctx context.Context, opts *clickhouse.Options, addr, dist, local string) (*sql.DB, error) {
	o := *opts
	o.Addr = []string{addr}
	o.Auth.Database = "system"
	o.MaxOpenConns, o.MaxIdleConns = 1, 1
	sys := clickhouse.OpenDB(&o)
	for _, d := range []string{dist, local} {
		if _, err := sys.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+d); err != nil {
			sys.Close()
			return nil, fmt.Errorf("cluster node %s: %w", addr, err)
		}
	}
	sys.Close()
	o.Auth.Database = local
	o.MaxOpenConns, o.MaxIdleConns = clickhouseWriteConns, clickhouseWriteConns
	db := clickhouse.OpenDB(&o)
	db.SetMaxOpenConns(clickhouseWriteConns)
	db.SetMaxIdleConns(clickhouseWriteConns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("cluster node %s: %w", addr, err)
	}
	return db, nil
}

// syncDistributed makes, on node n, a Distributed table over every local
// table of the schema, or makes it anew where its columns no longer match
// the local table's (a migration added some), holding the migrations' lock
// of the node's local database meanwhile. A Distributed table holds no rows
// of its own here (inserts are synchronous), so remaking it loses nothing.
func (c *chCluster) syncDistributed(ctx context.Context, n chNode) error {
	release, err := chLock(ctx, n.db)
	if err != nil {
		return err
	}
	defer release()
	tables, err := queryStrings(ctx, n.db, "SELECT name FROM system.tables WHERE database = ? ORDER BY name", c.local)
	if err != nil {
		return fmt.Errorf("distributed tables: %w", err)
	}
	for _, t := range tables {
		if t == "schema_migrations" || strings.HasPrefix(t, chLockTable) {
			continue
		}
		key, ok := chShardKeys[t]
		if !ok {
			return fmt.Errorf("distributed tables: table %s has no sharding key (chShardKeys)", t)
		}
		want, err := tableColumns(ctx, n.db, c.local, t)
		if err != nil {
			return fmt.Errorf("distributed tables: %w", err)
		}
		engine, err := queryStrings(ctx, n.db, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", c.dist, t)
		if err != nil {
			return fmt.Errorf("distributed tables: %w", err)
		}
		if len(engine) > 0 {
			if engine[0] != "Distributed" {
				return fmt.Errorf("distributed tables: %s.%s is a %s table, not Distributed: a cluster store keeps its rows in %s "+
					"(move them there, or name another database)", c.dist, t, engine[0], c.local)
			}
			have, err := tableColumns(ctx, n.db, c.dist, t)
			if err != nil {
				return fmt.Errorf("distributed tables: %w", err)
			}
			if slices.Equal(have, want) {
				continue
			}
			if _, err := n.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+c.dist+"."+t); err != nil {
				return fmt.Errorf("distributed tables: %w", err)
			}
		}
		ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s AS %s.%s ENGINE = Distributed(%s, %s, %s, %s)",
			c.dist, t, c.local, t, c.name, c.local, t, key)
		if _, err := n.db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("distributed tables: %w", err)
		}
	}
	return nil
}

// tableColumns returns "name type" of each column of db.table, in order.
func tableColumns(ctx context.Context, db *sql.DB, database, table string) ([]string, error) {
	return queryStrings(ctx, db, "SELECT concat(name, ' ', type) FROM system.columns WHERE database = ? AND table = ?", database, table)
}

// queryStrings returns the first column of q's rows.
func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// partPools are the pools on the databases that hold the tables' parts:
// the store's own, or each cluster node's local database. Partitions are
// dropped, days merged and bytes counted on each.
func (s *chStore) partPools() []*sql.DB {
	if s.cluster == nil {
		return []*sql.DB{s.write}
	}
	dbs := make([]*sql.DB, len(s.cluster.nodes))
	for i, n := range s.cluster.nodes {
		dbs[i] = n.db
	}
	return dbs
}
