package docker

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv/probe"
)

// fakeExecutor serves the executor socket of a Sandbox with no container:
// each connection's request head is read, then answer writes what the
// (hostile) sandbox chooses.
func fakeExecutor(t *testing.T, answer func(w io.Writer)) *Sandbox {
	t.Helper()
	root, err := os.MkdirTemp("", "tgx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	spec := sandbox.AgentSpec{Agent: "a", Workspace: filepath.Join(root, "workspace"),
		User: strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())}
	if err := os.MkdirAll(spec.ExecDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(spec.ExecDir(), proto.ExecSocketName))
	if err != nil {
		t.Fatal(err)
	}
	probe.Serve(t, ln, func(c net.Conn) {
		go io.Copy(io.Discard, bufio.NewReader(c)) // the request
		answer(c)
	})
	sb := &Sandbox{m: &Manager{log: slog.New(slog.DiscardHandler)}, agent: "a"}
	sb.h.Set("", spec)
	return sb
}

// binaryExitChunk is an exit frame, code 0.
var binaryExitChunk = string(proto.ExitFrame(proto.ExecExit{}))

// After its exit frame (or with a refusal) a hostile executor may keep
// sending: endless trailers, an endless body. The gateway must take its
// answer and go, neither holding the call nor buffering what follows.
func TestHostileExecutorCannotHoldTheGateway(t *testing.T) {
	endless := func(w io.Writer, line string) {
		for {
			if _, err := io.WriteString(w, line); err != nil {
				return
			}
		}
	}
	tests := map[string]func(w io.Writer){
		"endless trailer after the exit frame": func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: "+proto.ExecFramesMedia+"\r\nTransfer-Encoding: chunked\r\n\r\n")
			io.WriteString(w, strconv.FormatInt(int64(len(binaryExitChunk)), 16)+"\r\n"+binaryExitChunk+"\r\n0\r\n")
			endless(w, "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")
		},
		"endless body after the binary exit frame": func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: "+proto.ExecFramesMedia+"\r\nTransfer-Encoding: chunked\r\n\r\n")
			io.WriteString(w, strconv.FormatInt(int64(len(binaryExitChunk)), 16)+"\r\n"+binaryExitChunk+"\r\n")
			endless(w, "4\r\nxxxx\r\n")
		},
		"endless binary frame": func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: "+proto.ExecFramesMedia+"\r\n\r\n")
			io.WriteString(w, "o\xff\xff\xff\xff")
			endless(w, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
		},
		"refusal with an endless body": func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n")
			endless(w, "4\r\nxxxx\r\n")
		},
	}
	for name, answer := range tests {
		t.Run(name, func(t *testing.T) {
			sb := fakeExecutor(t, answer)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			out, err := sb.viaExecutor(ctx, &proto.ExecRequest{Argv: []string{"true"}}, nil, io.Discard, io.Discard, 0)
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("viaExecutor held for %s by what the executor sent after its answer", d)
			}
			if strings.Contains(name, "after the") && (err != nil || out.ExitCode != 0) {
				t.Fatalf("the answer before the flood was lost: %v", err)
			}
		})
	}
}
