package adminclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv/probe"
)

// rawServer answers every connection on a real Unix socket with answer,
// after reading the request's head, and returns a client of it.
func rawServer(t *testing.T, answer string) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "admin.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	probe.Serve(t, l, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		_, _ = io.WriteString(c, answer)
	})
	return &Client{network: "unix", addr: sock, host: "toolgate", token: "t"}
}

// TestAnswers: each way a server may frame its answer decodes to the same
// result; a malformed or cut answer is an error, never a hang or a wrong
// result.
func TestAnswers(t *testing.T) {
	t.Parallel()
	const result = `{"exitCode":0,"output":{"n":1}}`
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	for _, tc := range []struct {
		name, answer, err string
	}{
		{"content length", head + "Content-Length: 31\r\n\r\n" + result, ""},
		{"chunked", head + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"exi\r\n1a;ext=1\r\ntCode\":0,\"output\":{\"n\":1}}\r\n0\r\n\r\n", ""},
		{"to the end", head + "\r\n" + result, ""},
		{"bare LF lines", "HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: 31\n\n" + result, ""},
		{"after 100 Continue", "HTTP/1.1 100 Continue\r\n\r\n" + head + "Content-Length: 31\r\n\r\n" + result, ""},
		{"cut body", head + "Content-Length: 31\r\n\r\n" + result[:20], "unexpected EOF"},
		{"cut chunk", head + "Transfer-Encoding: chunked\r\n\r\n1f\r\n" + result[:20], "unexpected EOF"},
		{"chunk without its line end", head + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"exiXX1a\r\ntCode\":0,\"output\":{\"n\":1}}\r\n0\r\n\r\n", "line end"},
		{"bad chunk size", head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + result, "chunk size"},
		{"negative length", head + "Content-Length: -1\r\n\r\n", "content length"},
		{"gzip", head + "Transfer-Encoding: gzip\r\n\r\n", "transfer encoding"},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", "status line"},
		{"bad status", "HTTP/1.1 2x0 OK\r\n\r\n", "status line"},
		{"header without colon", "HTTP/1.1 200 OK\r\nContent-Type application/json\r\n\r\n", "header line"},
		{"no answer", "", "unexpected EOF"},
		{"head cut", "HTTP/1.1 200 OK\r\nContent-Type: app", "unexpected EOF"},
		{"error body", "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n\r\n" +
			`{"error":{"code":"denied","message":"no","rule":"r"}}`, "denied (r): no"},
		{"error without body", "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\noops", "daemon answered 502 Bad Gateway: oops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := rawServer(t, tc.answer).Call(context.Background(), "demo", "exec", map[string]any{}, nil, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want an error with %q", res, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode == nil || *res.ExitCode != 0 || res.Output.(map[string]any)["n"] != jsonNumber("1") {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// TestHeadBounded: an endless header is refused at 1 MiB, not read into
// memory until the server stops.
func TestHeadBounded(t *testing.T) {
	t.Parallel()
	long := "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", maxHead) + "\r\n\r\n"
	_, err := rawServer(t, long).Call(context.Background(), "demo", "exec", map[string]any{}, nil, nil)
	if !errors.Is(err, errHeadTooLong) {
		t.Fatalf("got %v, want %v", err, errHeadTooLong)
	}
}

// TestDaemonDown: nothing listening on the socket is ErrDaemonDown.
func TestDaemonDown(t *testing.T) {
	t.Parallel()
	c := &Client{network: "unix", addr: filepath.Join(t.TempDir(), "admin.sock"), host: "toolgate", token: "t"}
	if _, err := c.Call(context.Background(), "demo", "exec", map[string]any{}, nil, nil); !errors.Is(err, ErrDaemonDown) {
		t.Fatalf("got %v, want ErrDaemonDown", err)
	}
}

// TestHeaderInjection: a value that would end its header line is refused,
// not sent as two headers.
func TestHeaderInjection(t *testing.T) {
	t.Parallel()
	c := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
	_, err := c.WithSession("s\r\nAuthorization: Bearer other").Call(context.Background(), "demo", "exec", map[string]any{}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "control character") {
		t.Fatalf("got %v, want a refused header", err)
	}
}

// TestRawBodies: a raw call's body arrives whole, of a stated size or
// chunked when unknown; a body shorter or longer than its stated size fails
// the call instead of sending something else.
func TestRawBodies(t *testing.T) {
	t.Parallel()
	// A refused body's handler may still be reading when the next call
	// comes: got is each handler's, under mu.
	var (
		mu  sync.Mutex
		got []byte
	)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/{agent}/tools/{tool}/call", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = b
		mu.Unlock()
		writeJSON(w, &api.Result{Output: map[string]any{"args": r.Header.Get(api.ArgsHeader)}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := tcpClient(srv)
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // over the one-write size
	for _, tc := range []struct {
		name string
		body []byte
		size int64
		err  string
	}{
		{"small", []byte("hello"), 5, ""},
		{"empty", nil, 0, ""},
		{"big", big, int64(len(big)), ""},
		{"unknown size", big, -1, ""},
		{"small and short", []byte("hell"), 5, "4 bytes of 5"},
		{"small and long", []byte("hello!"), 5, "longer than"},
		{"big and short", big[1:], int64(len(big)), "bytes of"},
		{"big and long", big, int64(len(big) - 1), "longer than"},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		_, err := c.CallRaw(context.Background(), "demo", "write", map[string]any{"path": "f"}, bytes.NewReader(tc.body), tc.size)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		mu.Lock()
		if !bytes.Equal(got, tc.body) {
			t.Errorf("%s: server got %d bytes, want %d", tc.name, len(got), len(tc.body))
		}
		mu.Unlock()
	}
}

// TestEarlyRefusal: a server that answers before reading a big body (too
// large, denied) is heard, not hidden behind the broken write.
func TestEarlyRefusal(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/{agent}/tools/{tool}/call", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		writeJSON(w, map[string]*api.Error{"error": {Code: "too_large", Message: "over the limit"}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	big := bytes.NewReader(make([]byte, 64<<20))
	_, err := tcpClient(srv).CallRaw(context.Background(), "demo", "write", map[string]any{}, big, big.Size())
	var we *api.Error
	if !errors.As(err, &we) || we.Code != "too_large" {
		t.Fatalf("got %v, want the server's too_large", err)
	}
}

// TestCancelStream: cancelling the context ends a call whose answer is
// still streaming, with the context's error.
func TestCancelStream(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/{agent}/tools/{tool}/call", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server watches the connection for its end
		w.Header().Set("Content-Type", api.MediaNDJSON)
		writeJSON(w, &api.Frame{Stdout: []byte("started\n")})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	out := &signalWriter{wrote: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		_, err := tcpClient(srv).Call(ctx, "demo", "exec", map[string]any{}, out, io.Discard)
		done <- err
	}()
	<-out.wrote
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the call did not end when its context did")
	}
}

type signalWriter struct{ wrote chan struct{} }

func (s *signalWriter) Write(p []byte) (int, error) {
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

// TestRawOutTrailer: a raw read's bytes and its outcome in the trailer,
// from the real server's chunked answer.
func TestRawOutTrailer(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/{agent}/tools/{tool}/call", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", api.MediaRaw)
		w.Header().Set("Trailer", api.ResultTrailer)
		_, _ = w.Write([]byte("file bytes"))
		w.(http.Flusher).Flush()
		w.Header().Set(api.ResultTrailer, `{"result":{"output":{"bytes":10}}}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var out bytes.Buffer
	res, err := tcpClient(srv).CallRawOut(context.Background(), "demo", "read", map[string]any{}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "file bytes" || res.Output.(map[string]any)["bytes"] != jsonNumber("10") {
		t.Fatalf("got %q, %+v", out.String(), res)
	}
}

// TestDialReadsToken: Dial takes the token from the home and reaches its
// socket.
func TestDialReadsToken(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, api.TokenFile), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(home, api.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	var auth string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		writeJSON(w, []api.AgentStatus{{Agent: "demo"}})
	})}
	go srv.Serve(l)
	defer srv.Close()
	c, err := Dial(home)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := c.Agents(context.Background())
	if err != nil || len(rows) != 1 || rows[0].Agent != "demo" || auth != "Bearer tok" {
		t.Fatalf("rows %v, err %v, auth %q", rows, err, auth)
	}
}

// FuzzReadResponse: whatever a peer sends, reading its answer ends without
// a panic, within the bounds.
func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nToolgate-Result: {}\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 403 Forbidden\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := readResponse(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		n, _ := io.Copy(io.Discard, resp.body)
		if n > int64(len(b)) {
			t.Fatalf("read %d body bytes from %d", n, len(b))
		}
	})
}

// jsonNumber is how a decoded result holds a number: exact, as written.
func jsonNumber(s string) any { return json.Number(s) }

// unixServer serves mux on a real Unix socket, as the gateway's admin API
// listens, and returns a client of it.
func unixServer(t *testing.T, mux http.Handler) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "admin.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return &Client{network: "unix", addr: sock, host: "toolgate", token: "t"}
}

// TestFileBodies: a body that is a file (toolgate write's: an *os.File,
// or one cut by io.LimitReader at the size stated), sent by the kernel
// over a Unix or TCP socket, arrives as exactly the stated bytes from where
// the file stood, over many socket buffers; a file shorter than stated or
// (uncut) longer is an error, as a copied body's is; a server that refuses
// before reading it is heard.
func TestFileBodies(t *testing.T) {
	t.Parallel()
	content := make([]byte, 9<<20+77) // many socket buffers: the sender waits for the reader
	for i := range content {
		content[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	// What the server got, by the agent each case calls as: the handler
	// of a case whose client gave up may still be reading during the next.
	var mu sync.Mutex
	got := map[string][]byte{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/{agent}/tools/write/call", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.PathValue("agent")] = b
		mu.Unlock()
		writeJSON(w, &api.Result{})
	})
	mux.HandleFunc("POST /v1/agents/{agent}/tools/refuse/call", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		writeJSON(w, map[string]*api.Error{"error": {Code: "too_large", Message: "over the limit"}})
	})
	tcp := httptest.NewServer(mux)
	defer tcp.Close()
	clients := map[string]*Client{"unix": unixServer(t, mux), "tcp": tcpClient(tcp)}
	const skip = 1000
	for name, c := range clients {
		for i, tc := range []struct {
			name string
			cut  bool  // io.LimitReader(f, size), as toolgate write sends
			size int64 // stated; the file holds len(content)-skip from where it stands
			want []byte
			err  string
		}{
			{"cut, the rest", true, int64(len(content) - skip), content[skip:], ""},
			{"cut, a part", true, 5 << 20, content[skip : skip+5<<20], ""},
			{"uncut, the rest", false, int64(len(content) - skip), content[skip:], ""},
			{"uncut and long", false, 5 << 20, nil, "longer than its stated"},
			{"cut and short", true, int64(len(content)), nil, "bytes of"},
			{"uncut and short", false, int64(len(content)), nil, "bytes of"},
		} {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Seek(skip, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			var body io.Reader = f
			if tc.cut {
				body = io.LimitReader(f, tc.size)
			}
			agent := name + strconv.Itoa(i)
			_, err = c.CallRaw(context.Background(), agent, "write", map[string]any{}, body, tc.size)
			f.Close()
			mu.Lock()
			server := got[agent]
			mu.Unlock()
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("%s, %s: got %v, want an error with %q", name, tc.name, err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("%s, %s: %v", name, tc.name, err)
			case tc.err == "" && !bytes.Equal(server, tc.want):
				t.Errorf("%s, %s: the server got %d bytes, want %d (or other bytes)", name, tc.name, len(server), len(tc.want))
			}
		}
		big := filepath.Join(t.TempDir(), "big")
		if err := os.WriteFile(big, make([]byte, 64<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(big)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CallRaw(context.Background(), "demo", "refuse", map[string]any{}, io.LimitReader(f, 64<<20), 64<<20)
		f.Close()
		var we *api.Error
		if !errors.As(err, &we) || we.Code != "too_large" {
			t.Errorf("%s: a refusal before the file was read: got %v, want the server's too_large", name, err)
		}
	}
}

// failingSource gives its bytes, then an error.
type failingSource struct {
	r   io.Reader
	err error
}

func (f *failingSource) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// TestCallStream: an exec's stdin goes as bytes, every byte value intact,
// while the answer streams back — a server that echoes its input as it
// reads it, far past what the sockets hold, gets all of it and the client
// all of the echo. A source that fails ends the call with its error; a
// refusal before the body is read is the daemon's error.
func TestCallStream(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/demo/tools/exec/call", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != api.MediaRaw || r.Header.Get("Accept") != api.MediaNDJSON || r.Header.Get(api.ArgsHeader) != `{"argv":["cat"]}` {
			t.Errorf("request headers %v", r.Header)
		}
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Type", api.MediaNDJSON)
		enc := json.NewEncoder(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				_ = enc.Encode(api.Frame{Stdout: buf[:n]})
				w.(http.Flusher).Flush()
			}
			if err != nil {
				break // the end, or a cut body: the client knows which
			}
		}
		zero := 0
		_ = enc.Encode(api.Frame{Result: &api.Result{ExitCode: &zero}})
	})
	mux.HandleFunc("POST /v1/agents/refused/tools/exec/call", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		writeJSON(w, map[string]*api.Error{"error": {Code: "denied", Message: "no stdin for you"}})
	})
	c := unixServer(t, mux)
	// A guard, not a measure: a client that wrote the whole body before
	// reading would wait on the server forever.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := map[string]any{"argv": []string{"cat"}}

	in := make([]byte, 32<<20) // over the sockets' buffers (the client's send buffer is 4 MiB, doubled)
	for i := range in {
		in[i] = byte(i*31 + i>>8)
	}
	var out bytes.Buffer
	res, err := c.CallStream(ctx, "demo", "exec", args, bytes.NewReader(in), &out, io.Discard)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 || !bytes.Equal(out.Bytes(), in) {
		t.Fatalf("echo: %v %+v, %d bytes back of %d (equal: %v)", err, res, out.Len(), len(in), bytes.Equal(out.Bytes(), in))
	}

	broken := errors.New("the terminal went away")
	_, err = c.CallStream(ctx, "demo", "exec", args, &failingSource{bytes.NewReader(in[:1<<20]), broken}, io.Discard, io.Discard)
	if !errors.Is(err, broken) {
		t.Fatalf("failing source: got %v, want its error", err)
	}

	_, err = c.CallStream(ctx, "refused", "exec", args, bytes.NewReader(in), io.Discard, io.Discard)
	var e *api.Error
	if !errors.As(err, &e) || e.Code != "denied" {
		t.Fatalf("refusal: got %v", err)
	}
}
