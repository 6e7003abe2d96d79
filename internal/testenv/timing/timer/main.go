// Command timer runs inside a sandbox for the latency benchmarks: it starts
// ARGV -n times, -c at a time, with stdin from -in when given (else an empty
// pipe), and prints the wall time of one run, process start to exit, as
// p50/p99 in microseconds and the runs per second (JSON, with the last run's
// stdout). Built static by timing.Build.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"
)

func main() {
	n := flag.Int("n", 500, "runs")
	c := flag.Int("c", 1, "runs at a time")
	in := flag.String("in", "", "stdin file")
	flag.Parse()
	var stdin []byte
	if *in != "" {
		var err error
		if stdin, err = os.ReadFile(*in); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	d := make([]time.Duration, *n)
	var last bytes.Buffer
	next := make(chan int, *n)
	for i := range *n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	var mu sync.Mutex
	begin := time.Now()
	for range max(*c, 1) {
		wg.Go(func() {
			var out bytes.Buffer
			for i := range next {
				out.Reset()
				cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
				cmd.Stdin, cmd.Stdout = bytes.NewReader(stdin), &out
				start := time.Now()
				if err := cmd.Run(); err != nil {
					fmt.Fprintln(os.Stderr, flag.Args(), err)
					os.Exit(1)
				}
				d[i] = time.Since(start)
				if i == *n-1 {
					mu.Lock()
					last.Reset()
					last.Write(out.Bytes())
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(begin)
	slices.Sort(d)
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"p50_us": d[len(d)/2].Microseconds(), "p99_us": d[len(d)*99/100].Microseconds(),
		"per_s": float64(*n) / wall.Seconds(), "last_stdout": last.String(),
	})
}
