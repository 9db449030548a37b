package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Gang is the multi-node side of the engine: rank 0 listens on the master port and counts the workers that
// connect; every other rank resolves the master address, connects and says its rank. The wire is one line each
// way: `rank N host H` from the worker, `ok` (or `error REASON`) back; the connection then stays open for as long
// as both live, and a worker whose leader goes exits, as a vLLM worker does.
type Gang struct {
	args *Args

	mu      sync.Mutex
	workers map[int]workerConn // on rank 0: the connected ranks
	leader  string             // on a worker: the address it connected to, once it has
}

type workerConn struct {
	conn net.Conn
	host string
}

func NewGang(args *Args) *Gang { return &Gang{args: args, workers: map[int]workerConn{}} }

// Complete is true once the gang can serve: rank 0 with every worker rank connected, a worker connected to rank
// 0, a single node always.
func (g *Gang) Complete() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.args.NNodes == 1:
		return true
	case g.args.NodeRank == 0:
		return len(g.workers) == g.args.NNodes-1
	default:
		return g.leader != ""
	}
}

// Waiting says what the gang still waits for, or "" once complete.
func (g *Gang) Waiting() string {
	if g.Complete() {
		return ""
	}
	if g.args.NodeRank > 0 {
		return fmt.Sprintf("not yet connected to the leader %s:%d", g.args.MasterAddr, g.args.MasterPort)
	}
	return fmt.Sprintf("%d of %d worker ranks connected", len(g.ConnectedRanks()), g.args.NNodes-1)
}

// ConnectedRanks lists the worker ranks connected to rank 0, with their host names.
func (g *Gang) ConnectedRanks() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for rank, w := range g.workers {
		out[strconv.Itoa(rank)] = w.host
	}
	return out
}

// Leader is the address a worker connected to ("" before it has).
func (g *Gang) Leader() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.leader
}

// Listen starts rank 0's master port on every address, when there are workers to wait for.
func (g *Gang) Listen() error {
	if g.args.NNodes == 1 || g.args.NodeRank != 0 {
		return nil
	}
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", g.args.MasterPort))
	if err != nil {
		return fmt.Errorf("listen on the master port: %w", err)
	}
	log.Printf("rank 0 waits for %d worker ranks on %s", g.args.NNodes-1, l.Addr())
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				log.Printf("master port: %v", err)
				return
			}
			go g.serveWorker(conn)
		}
	}()
	return nil
}

func (g *Gang) serveWorker(conn net.Conn) {
	from := conn.RemoteAddr().String()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	_ = conn.SetReadDeadline(time.Time{})
	var rank int
	var host string
	if err == nil {
		_, err = fmt.Sscanf(strings.TrimSpace(line), "rank %d host %s", &rank, &host)
	}
	if err == nil && (rank < 1 || rank >= g.args.NNodes) {
		err = fmt.Errorf("rank %d is not a worker rank of %d nodes", rank, g.args.NNodes)
	}
	if err != nil {
		log.Printf("master port: refused %s: %v", from, err)
		fmt.Fprintf(conn, "error %v\n", err)
		conn.Close()
		return
	}
	g.mu.Lock()
	if old, ok := g.workers[rank]; ok {
		log.Printf("rank %d connected again from %s: dropping its earlier connection", rank, from)
		old.conn.Close()
	}
	g.workers[rank] = workerConn{conn: conn, host: host}
	connected := len(g.workers)
	g.mu.Unlock()
	fmt.Fprintf(conn, "ok\n")
	log.Printf("worker rank %d (%s) connected from %s; %d of %d worker ranks connected", rank, host, from, connected,
		g.args.NNodes-1)
	// Held until either side goes.
	_, _ = conn.Read(make([]byte, 1))
	g.mu.Lock()
	if g.workers[rank].conn == conn {
		delete(g.workers, rank)
		log.Printf("worker rank %d (%s) disconnected", rank, host)
	}
	g.mu.Unlock()
	conn.Close()
}

// Join connects a worker rank to rank 0 within `bound`: the master address is resolved through DNS and each of its
// addresses tried, every failure logged and retried after a growing pause. It fails once the bound passes. The
// connection is then watched: when it drops the process exits, as a vLLM worker whose leader went does.
func (g *Gang) Join(bound time.Duration) error {
	if g.args.NodeRank == 0 {
		return nil
	}
	host, _ := os.Hostname()
	addr := g.args.MasterAddr
	deadline := time.Now().Add(bound)
	pause := 250 * time.Millisecond
	var last error
	for attempt := 1; ; attempt++ {
		conn, ip, err := g.dial(host, deadline)
		if err == nil {
			g.mu.Lock()
			g.leader = net.JoinHostPort(ip, strconv.Itoa(g.args.MasterPort))
			g.mu.Unlock()
			log.Printf("connected to leader %s (%s) as rank %d", addr, ip, g.args.NodeRank)
			go func() {
				_, err := conn.Read(make([]byte, 1))
				log.Printf("lost the leader %s (%s): %v; exiting, as a vLLM worker does", addr, ip, err)
				os.Exit(1)
			}()
			return nil
		}
		last = err
		if time.Now().Add(pause).After(deadline) {
			break
		}
		log.Printf("attempt %d to reach the leader %s:%d failed: %v (retrying in %s)", attempt, addr,
			g.args.MasterPort, err, pause)
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Second)
	}
	return fmt.Errorf("could not connect to the leader %s:%d within %s: %w", addr, g.args.MasterPort, bound, last)
}

// dial resolves the master address and tries each of its addresses once, returning the first that answers `ok`.
func (g *Gang) dial(host string, deadline time.Time) (net.Conn, string, error) {
	ctx, cancel := context.WithDeadline(context.Background(), earliest(deadline, time.Now().Add(5*time.Second)))
	defer cancel()
	ips, err := net.DefaultResolver.LookupHost(ctx, g.args.MasterAddr)
	if err != nil {
		return nil, "", fmt.Errorf("resolve %s: %w", g.args.MasterAddr, err)
	}
	sort.SliceStable(ips, func(i, j int) bool { return strings.Contains(ips[j], ":") && !strings.Contains(ips[i], ":") })
	var last error
	for _, ip := range ips {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(g.args.MasterPort)))
		if err != nil {
			last = err
			continue
		}
		_ = conn.SetDeadline(earliest(deadline, time.Now().Add(10*time.Second)))
		fmt.Fprintf(conn, "rank %d host %s\n", g.args.NodeRank, host)
		reply, err := bufio.NewReader(conn).ReadString('\n')
		_ = conn.SetDeadline(time.Time{})
		if reply = strings.TrimSpace(reply); err == nil && reply == "ok" {
			return conn, ip, nil
		}
		conn.Close()
		if err == nil {
			err = fmt.Errorf("leader %s answered %q", ip, reply)
		}
		last = err
	}
	return nil, "", last
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
