package connlimit

import "syscall"

// Budget is how many connections each door may hold open at once. The caps
// sum to less than the descriptor limit: the rest is kept for what the
// gateway opens itself (audit files, the Docker Engine's connections, exec
// streams, upstream MCP servers), so a flood on one door cannot leave
// another, or the audit log, without a descriptor.
type Budget struct {
	Limit     uint64 // RLIMIT_NOFILE (soft) the budget was planned from
	Admin     int    // the admin socket in the home
	TCP       int    // gateway.listen
	PerSource int    // one source on TCP (Source: a remote host, or this host's users together)
	Agents    int    // all agent sockets together
	PerAgent  int    // one agent socket, so one sandbox cannot take the others' share
}

// Plan splits limit descriptors among the doors: a reserve of 256 plus an
// eighth (at most half) stays free; of the rest the admin socket gets an
// eighth, the TCP listener a quarter, the agent sockets five eighths, one
// agent at most half of theirs, one TCP source a quarter of the TCP
// listener's. Each cap has a ceiling: past it more
// connections buy nothing but memory.
func Plan(limit uint64) Budget {
	reserve := min(256+limit/8, limit/2)
	avail := int(min(limit-reserve, 1<<20))
	b := Budget{
		Limit:  limit,
		Admin:  clamp(avail/8, 4, 256),
		TCP:    clamp(avail/4, 8, 1024),
		Agents: clamp(avail*5/8, 16, 4096),
	}
	b.PerAgent = clamp(b.Agents/2, 8, 1024)
	b.PerSource = clamp(b.TCP/4, 4, 256)
	return b
}

// Nofile is the process's soft RLIMIT_NOFILE. The Go runtime has already
// raised it to the hard limit at start.
func Nofile() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	return r.Cur, nil
}

func clamp(n, lo, hi int) int { return min(max(n, lo), hi) }
