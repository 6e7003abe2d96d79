package guest

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
)

// NewModelForwarder is the sandbox's model base URL: plain HTTP on the
// container's loopback, each request passed to the model door on the agent
// socket (proto.ModelRoute), answers streamed back as they arrive. It
// adds nothing but the hints in its URL's first segment: the key is added
// on the host, after the gateway decided.
func NewModelForwarder(socket string) http.Handler {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: proto.DialTimeout}
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
	}
	rp := &httputil.ReverseProxy{
		Transport:     tr,
		FlushInterval: -1, // every write at once: the first token must not wait
		ErrorLog:      log.New(io.Discard, "", 0),
		Rewrite: func(pr *httputil.ProxyRequest) {
			parent, session, rest, _ := proto.ParseModelPath(pr.In.URL.Path)
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "toolgate"
			pr.Out.URL.Path = proto.ModelRoute + strings.TrimPrefix(rest, "/")
			pr.Out.URL.RawPath = ""
			pr.Out.Host = "toolgate"
			if parent != "" {
				pr.Out.Header.Set(proto.ModelHeaderParent, parent)
			}
			if session != "" {
				pr.Out.Header.Set(proto.ModelHeaderSession, session)
			}
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":%q}}`,
				"toolgate model door: the gateway is unavailable: "+unwrapOp(err).Error())
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, rest, ok := proto.ParseModelPath(r.URL.Path); !ok || strings.Count(rest, "/") < 2 {
			http.Error(w, "toolgate model door: use the base URL in ANTHROPIC_BASE_URL / OPENAI_BASE_URL (http://"+proto.ModelAddr+"/PROVIDER/…)", http.StatusNotFound)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// startModelForwarder serves the model base URL from init when the sandbox
// has model providers (TOOLGATE_MODEL=1). A failure is reported, not fatal.
func startModelForwarder(stderr io.Writer) {
	if os.Getenv("TOOLGATE_MODEL") != "1" {
		return
	}
	ln, err := net.Listen("tcp", proto.ModelAddr)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate-client init: model forwarder: %v\n", err)
		return
	}
	srv := &http.Server{Handler: NewModelForwarder(socketPath()), ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		if err := srv.Serve(ln); err != nil {
			fmt.Fprintf(stderr, "toolgate-client init: model forwarder: %v\n", err)
		}
	}()
}
