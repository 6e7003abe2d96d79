package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/internal/testenv/tmpdir"
)

// Postgres is a real PostgreSQL server (Debian's postgresql package) run
// for one test process from a temporary data directory, on a loopback port.
type Postgres struct {
	bin, data, log string
	port           int
	cred           *syscall.Credential
	mu             sync.Mutex
	dbs            int
}

var (
	pgOnce sync.Once
	pg     *Postgres
	pgErr  error
)

// NeedPostgres returns the process's PostgreSQL server, started on first
// use. It skips when none can be started, and fails when Strict. Main
// stops it.
func NeedPostgres(t testing.TB) *Postgres {
	Long(t, "PostgreSQL")
	t.Helper()
	pgOnce.Do(func() { pg, pgErr = startPostgres() })
	if pgErr != nil {
		if Strict() {
			t.Fatalf("PostgreSQL is required here (CI=true or TOOLGATE_REQUIRE_DOCKER=1; scripts/test.sh installs Debian's postgresql) but: %v", pgErr)
		}
		t.Skip(pgErr)
	}
	return pg
}

// stopPostgres stops the server, if one was started, and removes its data.
func stopPostgres() {
	if pg == nil {
		return
	}
	_ = pg.Stop()
	_ = os.RemoveAll(filepath.Dir(pg.data))
}

func startPostgres() (*Postgres, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		return nil, fmt.Errorf("no /usr/lib/postgresql/*/bin/pg_ctl (apt-get install postgresql)")
	}
	p := &Postgres{bin: filepath.Dir(bins[len(bins)-1])}
	root, err := tmpdir.New("toolgate-pg")
	if err != nil {
		return nil, err
	}
	p.data, p.log = filepath.Join(root, "data"), filepath.Join(root, "log")
	// initdb refuses to run as root: the server runs as the postgres user.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(root, uid, gid); err != nil {
			return nil, err
		}
	}
	if out, err := p.run("initdb", "-D", p.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if p.port, err = freePort(); err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (p *Postgres) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(p.bin, prog), args...)
	cmd.Dir = "/"
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	return cmd.CombinedOutput()
}

// Start starts the server (again) and waits until it accepts connections.
func (p *Postgres) Start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=200", p.port, filepath.Dir(p.data))
	if out, err := p.run("pg_ctl", "start", "-w", "-t", "60", "-D", p.data, "-l", p.log, "-o", opts); err != nil {
		logText, _ := os.ReadFile(p.log)
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, logText)
	}
	return nil
}

// Stop stops the server at once (pg_ctl stop -m fast): open connections end.
func (p *Postgres) Stop() error {
	if out, err := p.run("pg_ctl", "stop", "-w", "-m", "fast", "-D", p.data); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// DSN is the connection string of database db.
func (p *Postgres) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// NewDatabase creates an empty database for t and returns its DSN.
func (p *Postgres) NewDatabase(t testing.TB) string {
	t.Helper()
	p.mu.Lock()
	p.dbs++
	name := fmt.Sprintf("t%d_%s", p.dbs, strings.Trim(nonWord.ReplaceAllString(strings.ToLower(t.Name()), "_"), "_"))
	p.mu.Unlock()
	if len(name) > 60 {
		name = name[:60]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		t.Fatalf("connecting to the test PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	return p.DSN(name)
}
