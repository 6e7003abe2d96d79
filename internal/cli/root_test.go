package cli

import "testing"

func TestDefaultHome(t *testing.T) {
	t.Setenv("TOOLGATE_HOME", "/srv/tg")
	if h, err := defaultHome(); err != nil || h != "/srv/tg" {
		t.Errorf("defaultHome() = %q, %v", h, err)
	}
	t.Setenv("TOOLGATE_HOME", "")
	t.Setenv("HOME", "/home/x")
	if h, err := defaultHome(); err != nil || h != "/home/x/.toolgate" {
		t.Errorf("defaultHome() = %q, %v", h, err)
	}
}
