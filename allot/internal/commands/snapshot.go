package commands

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"
)

func (a *app) snapshotCommand() *cli.Command {
	return &cli.Command{
		Name:  "snapshot",
		Usage: "save a backup of the whole replicated state, or restore one",
		Commands: []*cli.Command{
			{
				Name:      "save",
				Usage:     "save a backup of the replicated state to FILE",
				ArgsUsage: "FILE",
				UsageText: "allot snapshot save FILE",
				Description: "The backup is written to FILE.tmp and renamed to FILE once complete: FILE is\n" +
					"never a partial backup. Prints the Raft index the backup reflects.\n\n" +
					"Example:\n  allot snapshot save backup.snap",
				Action: a.snapshotSave,
			},
			{
				Name:      "restore",
				Usage:     "replace the cluster's replicated state with the backup in FILE",
				ArgsUsage: "FILE",
				UsageText: "allot snapshot restore [-dry-run] FILE",
				Description: "Every object comes back with its version, and the audit trail with it. Meant\n" +
					"for a fresh cluster, or one whose state is to be thrown away: the cluster's own\n" +
					"objects are gone, and its ACL tokens become the backup's (the token you restore\n" +
					"with stops working unless the backup has it). -dry-run has the leader check the\n" +
					"file as a restore would, and changes nothing.\n\n" +
					"Examples:\n" +
					"  allot snapshot restore -dry-run backup.snap\n" +
					"  allot snapshot restore backup.snap",
				Flags: []cli.Flag{&cli.BoolFlag{
					Name:  "dry-run",
					Usage: "restore nothing: have the cluster check the file and say whether it would restore it",
				}},
				Action: a.snapshotRestore,
			},
		},
	}
}

func (a *app) snapshotSave(ctx context.Context, cmd *cli.Command) (err error) {
	in, err := args(cmd, "FILE")
	if err != nil {
		return err
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	path := in[0]
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return usageErrorf(cmd, "snapshot save: %v", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	index, err := c.SaveSnapshot(ctx, f)
	if err != nil {
		return err
	}
	// The backup must be on disk before it takes the final name: a crash
	// right after the rename must not leave an empty FILE.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("snapshot save: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("snapshot save: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	_, err = fmt.Fprintf(a.stdout, "Saved a snapshot at index %d to %s.\n", index, path)
	return err
}

func (a *app) snapshotRestore(ctx context.Context, cmd *cli.Command) error {
	in, err := args(cmd, "FILE")
	if err != nil {
		return err
	}
	f, err := os.Open(in[0])
	if err != nil {
		return usageErrorf(cmd, "snapshot restore: %v", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.IsDir() {
		return usageErrorf(cmd, "snapshot restore: %s is a directory", in[0])
	}
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	if cmd.Bool("dry-run") {
		checked, err := c.CheckBackup(ctx, f)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "Dry run: nothing was changed. The cluster would restore the snapshot in %s: "+
			"its state would be at index %d.\n", in[0], checked.Index)
		return err
	}
	restored, err := c.RestoreSnapshot(ctx, f)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "Restored the snapshot in %s: the cluster's state is at index %d.\n", in[0], restored.Index)
	return err
}
