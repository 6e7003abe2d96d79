package gatewaycmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/sandbox/docker"
	"github.com/toolgate/toolgate/internal/sandbox/rootfs"
)

func newSandboxCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Manage sandbox images"}
	var (
		force   bool
		profile string
		list    bool
	)
	image := &cobra.Command{
		Use:   "image [TAG]",
		Short: "Build a sandbox image offline from a profile (default: busybox-static)",
		Long: `Builds a sandbox image without a container registry: the root filesystem is
made on this host (from its busybox-static, or a Debian base made by
mmdebstrap from the Debian archive plus a CLI from npm) and imported into
Docker. Downloads are cached under $TOOLGATE_IMAGE_CACHE (default
$TMPDIR/toolgate-image-cache); an image whose profile version is current
is not rebuilt. Set the printed tag as an agent's image in config.yaml.

Any image of your own works too: toolgate mounts everything it needs.`,
		Example: `  toolgate sandbox image --profile claude-code
  toolgate sandbox image --list`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if list {
				for _, p := range rootfs.Profiles() {
					fmt.Printf("%-12s %-28s %s\n", p.Name(), p.Tag(), p.Summary())
				}
				return nil
			}
			p, err := rootfs.Lookup(profile)
			if err != nil {
				return cli.UsageErr(cmd, err.Error())
			}
			tag := p.Tag()
			if len(args) == 1 {
				tag = args[0]
			}
			mgr, err := docker.New(cmd.Context(), docker.Options{})
			if err != nil {
				return err
			}
			defer mgr.Close()
			built, err := mgr.BuildImage(cmd.Context(), tag, p, rootfs.Env{Log: os.Stderr}, force)
			if err != nil {
				return err
			}
			if built {
				fmt.Println("built", tag)
			} else {
				fmt.Println(tag, "is current (use --force to rebuild)")
			}
			return nil
		},
	}
	image.Flags().BoolVar(&force, "force", false, "rebuild even when the image is current")
	image.Flags().StringVar(&profile, "profile", "default", "what the image holds (see --list)")
	image.Flags().BoolVar(&list, "list", false, "list the profiles")
	cmd.AddCommand(image)
	return cmd
}
