package proto

import (
	"encoding/base64"
	"strings"
)

// The proxy credential. Every process in a sandbox with egress has its
// proxy variables point at the forwarder (ProxyAddr); an exec call's
// processes get ProxyURL(id), whose user names the call, so the forwarder
// can attribute their connections to it (ProxyCallID). The credential is a
// correlation hint, never identity: the agent is the socket's.
const proxyUserPrefix = "call-"

// ProxyURL is the forwarder's URL as proxy variables carry it: with the
// credential of call callID, or unattributed when callID is "".
func ProxyURL(callID string) string {
	if callID == "" {
		return "http://" + ProxyAddr
	}
	return "http://" + proxyUserPrefix + callID + ":x@" + ProxyAddr
}

// ProxyCallID is the call id in a Proxy-Authorization header carrying
// ProxyURL's credential; "" when there is none or it is not a valid call id.
func ProxyCallID(authorization string) string {
	scheme, cred, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return ""
	}
	user, _, _ := strings.Cut(string(raw), ":")
	id, ok := strings.CutPrefix(user, proxyUserPrefix)
	if !ok || !ValidCallID(id) {
		return ""
	}
	return id
}
