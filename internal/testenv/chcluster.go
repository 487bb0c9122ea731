package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ClickHouseNode is a clickhouse-server of a test's own: its own data
// directory and loopback port, one shard of the cluster that
// StartClickHouseCluster configured. Stop kills it the way a crash does
// (SIGKILL) and Start brings it back on the same port and data.
type ClickHouseNode struct {
	t    testing.TB
	bin  string
	dir  string
	Port int
	cmd  *exec.Cmd
}

// ClickHouseServerBinary returns the path of Debian's clickhouse-server
// (PATH, then /usr/sbin), or skips t saying why (fails under
// TTFX_REQUIRE_ALL=1).
func ClickHouseServerBinary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return p
	}
	if st, err := os.Stat("/usr/sbin/clickhouse-server"); err == nil && !st.IsDir() {
		return "/usr/sbin/clickhouse-server"
	}
	Missing(t, "clickhouse-server (a cluster of the test's own)", "install Debian's clickhouse-server (scripts/ci-clickhouse.sh does)")
	return ""
}

// StartClickHouseCluster starts one clickhouse-server per shard on free
// loopback ports, each with its own data directory under t.TempDir(), all
// configured with a remote_servers cluster named cluster that has one
// replica per shard, and waits until each answers. The servers are killed
// when t ends. Without ZooKeeper (none here) there is no replication and
// no ON CLUSTER DDL: a test talks to each node itself.
func StartClickHouseCluster(t testing.TB, cluster string, shards int) []*ClickHouseNode {
	t.Helper()
	bin := ClickHouseServerBinary(t)
	nodes := make([]*ClickHouseNode, shards)
	for i := range nodes {
		nodes[i] = &ClickHouseNode{t: t, bin: bin, dir: t.TempDir(), Port: freePort(t)}
	}
	var remote strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&remote, "<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>", n.Port)
	}
	for _, n := range nodes {
		n.writeConfig(cluster, remote.String())
	}
	for _, n := range nodes {
		n.launch()
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Stop()
		}
	})
	for _, n := range nodes {
		n.waitReady()
	}
	return nodes
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (n *ClickHouseNode) writeConfig(cluster, shards string) {
	for _, d := range []string{"data", "tmp", "log", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			n.t.Fatal(err)
		}
	}
	users := `<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
        <profile>default</profile><quota>default</quota></default></users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
        <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`
	// Small caches and pools: the test's nodes share a small machine with
	// the suite's other servers.
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>%[1]s/log/server.log</log><errorlog>%[1]s/log/error.log</errorlog><size>10M</size><count>1</count></logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>%[2]d</tcp_port>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <format_schema_path>%[1]s/format_schemas/</format_schema_path>
    <users_config>%[1]s/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>67108864</mark_cache_size>
    <uncompressed_cache_size>67108864</uncompressed_cache_size>
    <max_concurrent_queries>50</max_concurrent_queries>
    <background_pool_size>2</background_pool_size>
    <mlock_executable>false</mlock_executable>
    <remote_servers><%[3]s>%[4]s</%[3]s></remote_servers>
</yandex>
`, n.dir, n.Port, cluster, shards)
	for name, body := range map[string]string{"users.xml": users, "config.xml": config} {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(body), 0o644); err != nil {
			n.t.Fatal(err)
		}
	}
}

// Addr is the node's host:port (the native protocol).
func (n *ClickHouseNode) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// DSN is a clickhouse:// DSN of database db on this node.
func (n *ClickHouseNode) DSN(db string) string { return "clickhouse://" + n.Addr() + "/" + db }

func (n *ClickHouseNode) launch() {
	n.cmd = exec.Command(n.bin, "--config-file="+filepath.Join(n.dir, "config.xml"))
	out, err := os.Create(filepath.Join(n.dir, "log", "stdout.log"))
	if err != nil {
		n.t.Fatal(err)
	}
	n.cmd.Stdout, n.cmd.Stderr = out, out
	if err := n.cmd.Start(); err != nil {
		out.Close()
		n.t.Fatalf("start clickhouse-server: %v", err)
	}
	out.Close()
}

// Start starts the node again after Stop and waits until it answers.
func (n *ClickHouseNode) Start() {
	n.t.Helper()
	if n.cmd != nil {
		return
	}
	n.launch()
	n.waitReady()
}

// Stop kills the node (SIGKILL, as a crash or a lost machine would) and
// waits for it to exit.
func (n *ClickHouseNode) Stop() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Kill()
	n.cmd.Wait()
	n.cmd = nil
}

// Exec runs one statement on the node.
func (n *ClickHouseNode) Exec(ctx context.Context, q string) error {
	db := clickhouse.OpenDB(&clickhouse.Options{Addr: []string{n.Addr()}, DialTimeout: 5 * time.Second})
	defer db.Close()
	_, err := db.ExecContext(ctx, q)
	return err
}

func (n *ClickHouseNode) waitReady() {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := n.Exec(ctx, "SELECT 1")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(n.dir, "log", "error.log"))
			if len(log) > 2000 {
				log = log[len(log)-2000:]
			}
			n.t.Fatalf("clickhouse-server on port %d did not answer within 60 s: %v\n%s", n.Port, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
