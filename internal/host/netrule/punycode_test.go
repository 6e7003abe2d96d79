package netrule

import "testing"

// Samples from RFC 3492 §7.1 (mixed case is kept by the raw encoder).
func TestPunycodeEncodeRFC3492(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"\u0644\u064A\u0647\u0645\u0627\u0628\u062A\u0643\u0644\u0645\u0648\u0634\u0639\u0631\u0628\u064A\u061F", "egbpdaj6bu4bxfgehfvwxn"},
		{"\u4ED6\u4EEC\u4E3A\u4EC0\u4E48\u4E0D\u8BF4\u4E2D\u6587", "ihqwcrb4cv8a8dqg056pqjye"},
		{"3年B組金八先生", "3B-ww4c5e180e575a65lsy2b"},
		{"安室奈美恵-with-SUPER-MONKEYS", "-with-SUPER-MONKEYS-pc58ag80a8qai00g7n9n"},
		{"MajiでKoiする5秒前", "MajiKoi5-783gue6qz075azm5e"},
		{"パフィーdeルンバ", "de-jg4avhby1noc0d"},
		{"そのスピードで", "d9juau41awczczp"},
		{"bücher", "bcher-kva"},
		{"münchen", "mnchen-3ya"},
		{"ü", "tda"},
		{"abc", "abc-"},
	}
	for _, c := range cases {
		got, err := punycodeEncode(c.in)
		if err != nil || got != c.want {
			t.Errorf("punycodeEncode(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := punycodeEncode("\xff"); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
}
