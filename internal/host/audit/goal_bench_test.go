package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"golang.org/x/mod/sumdb/note"
)

func synthID(i int) string { return fmt.Sprintf("18ed0cfbfd94ff%018d", i) }

// synthEntry is entry i of a log like the daemon writes: a decision with
// its arguments, then the call's result with duration, exit code and detail.
func synthEntry(i int) *gateway.Entry {
	e := &gateway.Entry{TS: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond),
		ID: synthID(i), Agent: "demo", Type: gateway.KindCore, Tool: "exec", Decision: "allow", Rule: "default",
		Session: "18ed0cfbf8227ea357e317a3095b6d21"}
	if i%2 == 0 {
		e.Phase = gateway.PhaseDecision
		e.Args = json.RawMessage(fmt.Sprintf(`{"command":"ls -la /workspace/src/pkg%d && go test ./... 2>&1 | tail -n 20","timeout":30}`, i))
		return e
	}
	d, c := 12.5+float64(i%100), i%3
	e.Phase, e.DurationMs, e.ExitCode = gateway.PhaseResult, &d, &c
	e.Detail = map[string]any{"stdoutBytes": i % 4096, "truncated": false, "note": "é\t\"quoted\""}
	return e
}

// synthLog writes a chained log of n synthEntry lines into dir, rotating
// every perFile entries (never when 0), and the head, as the writer would
// but without an fsync per batch. It returns the log's size in bytes.
func synthLog(tb testing.TB, dir string, n, perFile int) int64 {
	return synthProofLog(tb, dir, n, perFile, nil)
}

// synthProofLog is synthLog that, with a key, also writes the tree file
// and a checkpoint line every DefaultCheckpointEvery entries, as the
// writer does.
func synthProofLog(tb testing.TB, dir string, n, perFile int, key note.Signer) int64 {
	tb.Helper()
	t := &tree{}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	var (
		out   *bufio.Writer
		f     *os.File
		total int64
		prev  string
	)
	closeFile := func(rotateTo string) {
		if err := out.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := f.Close(); err != nil {
			tb.Fatal(err)
		}
		if rotateTo != "" {
			if err := os.Rename(filepath.Join(dir, CurrentFile), filepath.Join(dir, rotateTo)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		if perFile > 0 && i > 0 && i%perFile == 0 {
			closeFile(rotatedPrefix + t0.Add(time.Duration(i)*time.Second).Format(rotatedLayout) + rotatedSuffix)
			f = nil
		}
		if f == nil {
			var err error
			if f, err = os.Create(filepath.Join(dir, CurrentFile)); err != nil {
				tb.Fatal(err)
			}
			out = bufio.NewWriterSize(f, 1<<20)
		}
		buf.Reset()
		e := synthEntry(i)
		if err := encodeLine(&buf, enc, e, prev); err != nil {
			tb.Fatal(err)
		}
		prev = e.Hash
		if key != nil {
			h, _ := hexHash(e.Hash)
			t.add(h)
		}
		if key != nil && (i+1)%DefaultCheckpointEvery == 0 {
			cp, _, err := checkpointEntry(t, []note.Signer{key})
			if err != nil {
				tb.Fatal(err)
			}
			if err := encodeLine(&buf, enc, cp, prev); err != nil {
				tb.Fatal(err)
			}
			prev = cp.Hash
			h, _ := hexHash(cp.Hash)
			t.add(h)
		}
		total += int64(buf.Len())
		out.Write(buf.Bytes())
	}
	closeFile("")
	if key != nil {
		if err := os.WriteFile(filepath.Join(dir, TreeFile), t.pending, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, HeadFile), fmt.Appendf(nil, "%-*s\n", hashHexLen, prev), 0o600); err != nil {
		tb.Fatal(err)
	}
	return total
}

// verifyDecoding is Verify as it was before fastLink: every line read with
// ReadBytes and decoded whole into an Entry. It is the baseline of
// BenchmarkGoalAuditVerify and returns the number of entries.
func verifyDecoding(tb testing.TB, dir string) int {
	files, err := allFiles(dir)
	if err != nil {
		tb.Fatal(err)
	}
	n, last := 0, ""
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		r := bufio.NewReaderSize(f, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				break
			}
			e, perr := parseLine(line[:len(line)-1])
			if perr != nil || e.Prev != last {
				tb.Fatalf("%s: line %d: %v", path, n+1, perr)
			}
			last = e.Hash
			n++
		}
		f.Close()
	}
	return n
}

// BenchmarkGoalAuditVerify: audit verify of a 200k-entry log in four
// files, in entries/s; the goal is 500k/s or more. The baseline decodes
// every line, as verify did. entries/cpu-s is the same per second of CPU
// the process used, which a loaded machine does not change.
func BenchmarkGoalAuditVerify(b *testing.B) {
	const entries = 200_000
	dir := b.TempDir()
	synthLog(b, dir, entries, entries/4)
	for _, mode := range []string{"toolgate", "baseline"} {
		b.Run(mode, func(b *testing.B) {
			cpu0 := cpuTime(b)
			for b.Loop() {
				if mode == "baseline" {
					if n := verifyDecoding(b, dir); n != entries {
						b.Fatalf("baseline read %d entries", n)
					}
					continue
				}
				rep, err := Verify(dir)
				if err != nil || !rep.OK() || rep.Entries != entries {
					b.Fatalf("verify: %v %+v", err, rep)
				}
			}
			b.ReportMetric(float64(entries*b.N)/b.Elapsed().Seconds(), "entries/s")
			b.ReportMetric(float64(entries*b.N)/(cpuTime(b)-cpu0).Seconds(), "entries/cpu-s")
		})
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The tail benchmark measures a child process (this test binary again), so
// its peak RSS is that of one tail and nothing else.
const tailChildEnv = "TOOLGATE_AUDIT_TAIL_CHILD" // "toolgate|baseline:DIR"

func TestMain(m *testing.M) {
	if v := os.Getenv(tailChildEnv); v != "" {
		mode, dir, _ := strings.Cut(v, ":")
		n, err := tailChild(mode, dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(n)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tailChild prints the last 20 entries' count: by Tail, or, as the
// baseline, as Tail did before it read from the end: audit.jsonl decoded
// whole, then cut to the last 20.
func tailChild(mode, dir string) (int, error) {
	const n = 20
	count := 0
	if mode == "toolgate" {
		err := Tail(context.Background(), dir, Filter{}, n, false, func(*gateway.Entry) error { count++; return nil })
		return count, err
	}
	f, err := os.Open(filepath.Join(dir, CurrentFile))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var all []*gateway.Entry
	if _, err := scanFrom(f, 0, &Filter{}, func(e *gateway.Entry) error { all = append(all, e); return nil }); err != nil {
		return 0, err
	}
	return len(all[max(0, len(all)-n):]), nil
}

// BenchmarkGoalAuditTail: peak RSS of `audit tail -n 20` of a 300k-entry
// log (two 64 MiB files, the default size), in a child process; the goal
// is a peak that does not grow with the log. The baseline decodes
// audit.jsonl whole, as tail did.
func BenchmarkGoalAuditTail(b *testing.B) {
	dir := b.TempDir()
	synthLog(b, dir, 300_000, 150_000)
	for _, mode := range []string{"toolgate", "baseline"} {
		b.Run(mode, func(b *testing.B) {
			peak := int64(0)
			for b.Loop() {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), tailChildEnv+"="+mode+":"+dir)
				out, err := cmd.Output()
				if err != nil || string(out) != "20" {
					b.Fatalf("tail child: %q, %v", out, err)
				}
				peak = max(peak, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) // KiB
			}
			b.ReportMetric(float64(peak)/1024, "peak-MiB")
		})
	}
}
