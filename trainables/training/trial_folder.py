"""What a trial's folder in the study's storage holds beside the checkpoint Tune names.

Tune keeps one checkpoint per trial (`num_to_keep=1`): on registering a trial's new checkpoint
it deletes the previous one, and only afterwards uploads, in the background, the experiment
state that names the new one. A driver killed, or a store lost, in between leaves a state that
names a checkpoint which is gone, one older than the trial's last (its final one among them),
or none at all. Every attempt of a trial writes into the same folder, so the folder settles
what the state cannot: the final checkpoint the trial already saved, or the checkpoint that
replaced the named one.
"""

from __future__ import annotations

import json

import pyarrow.fs

# how Tune names the folder of each checkpoint it keeps in a trial's folder (zero-padded index)
CHECKPOINT_PREFIX = "checkpoint_"
FINAL_FILE = "final_result.json"
# the final checkpoint's Hugging Face folder of the trained tagger (trainables/model/export.py)
MODEL_FOLDER = "model"


class TrialFolder:
    """The checkpoints in a trial's `folder` on `filesystem`, and the one Tune's state `named`
    for the trial to restore from (None: it named none)."""

    def __init__(self, filesystem: pyarrow.fs.FileSystem, folder: str, named: str | None) -> None:
        self.filesystem = filesystem
        self.named = named.rstrip("/") if named else None
        self.checkpoints = self._checkpoints(folder.rstrip("/"))

    def _checkpoints(self, folder: str) -> list[str]:
        try:
            entries = self.filesystem.get_file_info(pyarrow.fs.FileSelector(folder))
        except OSError:  # what cannot be listed settles nothing: Tune's choice stands
            return []
        return sorted(
            e.path.rstrip("/")
            for e in entries
            if e.type == pyarrow.fs.FileType.Directory and e.base_name.startswith(CHECKPOINT_PREFIX)
        )

    def final_checkpoint(self) -> str | None:
        """The trial's final checkpoint, whichever one the state named, if any."""
        for path in reversed(self.checkpoints):  # a trial ends once: its final is its newest
            try:
                with self.filesystem.open_input_stream(f"{path}/{FINAL_FILE}") as stream:
                    json.loads(stream.read())
            except (OSError, ValueError):  # not a final checkpoint, or one cut short
                continue
            return path
        return None

    def restore_point(self) -> str | None:
        """The named checkpoint where it is still there; else the one registered in its place.

        Tune deletes a checkpoint only after registering the next one, and registers one only
        after it is stored whole, so the first checkpoint after a deleted one is whole (a
        later one may have been cut short mid-upload, and is not taken). A state that named
        none is left as it is: an unnamed checkpoint may be the one cut short."""
        if self.named is None or self.named in self.checkpoints:
            return self.named
        return next((p for p in self.checkpoints if p > self.named), self.named)
