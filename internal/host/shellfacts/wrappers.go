package shellfacts

import "strings"

// A wrapper runs another command given on its own command line. It returns
// the index in args of that command (len(args) when there is none, -1 when
// its options could not be read), environment it sets, and, for env -S, an
// argument that is itself a command line.
type wrapper func(args []word) (target int, env map[string]string, split *word)

// optSpec describes a wrapper's options: which take an argument (short
// letters, long names), and how many operands come before the command.
type optSpec struct {
	withArg  string          // short options taking an argument: "u" for -u USER
	longArg  map[string]bool // long options taking an argument when not given as --x=v
	operands int             // words before the command: timeout's DURATION, chroot's NEWROOT
	assigns  bool            // NAME=value words before the command (env, sudo)
	split    byte            // env's -S: the option whose argument is a command line
}

func (o optSpec) wrapper(args []word) (int, map[string]string, *word) {
	var env map[string]string
	operands := o.operands
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			return -1, env, nil
		}
		s := a.lit
		switch {
		case s == "--":
			return i + 1 + operands, env, nil
		case strings.HasPrefix(s, "--") && len(s) > 2:
			name, _, hasVal := strings.Cut(s[2:], "=")
			if o.longArg[name] && !hasVal {
				i++
			}
			if o.split != 0 && name == "split-string" {
				if hasVal {
					w := word{lit: s[len("--split-string="):], static: true}
					return i + 1, env, &w
				}
				if i < len(args) {
					return i + 1, env, &args[i]
				}
			}
		case len(s) > 1 && s[0] == '-':
			for j := 1; j < len(s); j++ {
				c := s[j]
				if strings.IndexByte(o.withArg, c) < 0 && c != o.split {
					continue
				}
				// The rest of the word, or the next word, is the argument.
				var arg *word
				if j+1 < len(s) {
					arg = &word{lit: s[j+1:], static: true}
				} else if i+1 < len(args) {
					i++
					arg = &args[i]
				}
				if c == o.split && o.split != 0 {
					if arg == nil {
						return -1, env, nil
					}
					return i + 1, env, arg
				}
				break
			}
		case o.assigns && isAssign(s):
			name, val, _ := strings.Cut(s, "=")
			if env == nil {
				env = map[string]string{}
			}
			env[name] = val
		default:
			if operands > 0 {
				operands--
				continue
			}
			return i, env, nil
		}
	}
	if operands > 0 {
		return -1, env, nil
	}
	return len(args), env, nil
}

func isAssign(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

func long(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// wrappers are the commands whose target a rule must see through. Their
// options are those of GNU coreutils, findutils, util-linux, sudo and doas.
var wrappers = map[string]wrapper{
	"env": optSpec{withArg: "uCP", split: 'S', assigns: true,
		longArg: long("unset", "chdir", "default-signal", "ignore-signal", "block-signal")}.wrapper,
	"command":  optSpec{}.wrapper,
	"builtin":  optSpec{}.wrapper,
	"exec":     optSpec{withArg: "a"}.wrapper,
	"nice":     optSpec{withArg: "n", longArg: long("adjustment")}.wrapper,
	"nohup":    optSpec{}.wrapper,
	"setsid":   optSpec{}.wrapper,
	"time":     optSpec{withArg: "fo", longArg: long("format", "output")}.wrapper,
	"stdbuf":   optSpec{withArg: "ioe", longArg: long("input", "output", "error")}.wrapper,
	"timeout":  optSpec{withArg: "sk", longArg: long("signal", "kill-after"), operands: 1}.wrapper,
	"chroot":   optSpec{longArg: long("userspec", "groups"), operands: 1}.wrapper,
	"ionice":   optSpec{withArg: "cnp"}.wrapper,
	"taskset":  optSpec{operands: 1}.wrapper,
	"busybox":  optSpec{}.wrapper,
	"unbuffer": optSpec{}.wrapper,
	"xargs": optSpec{withArg: "IadELnPs", longArg: long("arg-file", "delimiter", "eof",
		"replace", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var")}.wrapper,
	"sudo": optSpec{withArg: "ugCDhprtTU", assigns: true,
		longArg: long("user", "group", "close-from", "chdir", "host", "prompt", "role", "type",
			"command-timeout", "other-user")}.wrapper,
	"doas": optSpec{withArg: "uC"}.wrapper,
}
