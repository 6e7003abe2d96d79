package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/sandbox/docker"
)

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Manage sandbox images"}
	var force bool
	image := &cobra.Command{
		Use:   "image [TAG]",
		Short: "Build the default sandbox image offline from the host's busybox-static",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tag := sandbox.DefaultImage
			if len(args) == 1 {
				tag = args[0]
			}
			mgr, err := docker.New(cmd.Context(), docker.Options{})
			if err != nil {
				return err
			}
			defer mgr.Close()
			built, err := mgr.BuildDefaultImage(cmd.Context(), tag, force)
			if err != nil {
				return err
			}
			if built {
				fmt.Println("built", tag)
			} else {
				fmt.Println(tag, "exists (use --force to rebuild)")
			}
			return nil
		},
	}
	image.Flags().BoolVar(&force, "force", false, "rebuild even when the image exists")
	cmd.AddCommand(image)
	return cmd
}
