"""The `files` source from Python: an ImageFolder tree listed as torchvision's ImageFolder
lists it (class order and numbering, the order of the samples), a file list, and a
mixture by `sample`."""

import os

import torchvision

import dataecho as de

# Class names whose byte order is not their "natural" order: capitals first, '-' before
# '_', a space, a non-ASCII name, a hidden folder (torchvision keeps it), a number.
CLASSES = ["cat", "Cat", "a_b", "a-b", "a b", "\u00e9t\u00e9", "Zebra", ".hidden", "10", "9"]
FILES = ["x.jpg", "B.JPG", "sub/a.png", "sub-b/c.jpeg", "sub/deeper/d.webp", ".h.jpg",
         "notes.txt", "y.Tiff"]


def make_tree(root):
    for c in CLASSES:
        for f in FILES:
            path = os.path.join(root, c, f)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as out:
                out.write(os.path.join(c, f).encode())
    with open(os.path.join(root, "loose.jpg"), "wb") as out:
        out.write(b"not in a class")


def test_image_folder_order_equals_torchvisions(tmp_path):
    make_tree(str(tmp_path))
    tv = torchvision.datasets.ImageFolder(str(tmp_path), loader=lambda p: p)
    got = list(de.source("files", root=str(tmp_path), reads_in_flight=4).build(as_numpy=True))
    assert len(got) == len(tv.samples) == len(CLASSES) * 7  # notes.txt is not an image
    for i, (b, (path, target)) in enumerate(zip(got, tv.samples)):
        assert b.ids == [i]
        assert int(b["label"]) == target
        assert bytes(b["image"]) == os.path.relpath(path, str(tmp_path)).encode()
    # class_to_idx, as the labels show it
    idx = {}
    for b in got:
        idx[bytes(b["image"]).decode().split("/")[0]] = int(b["label"])
    assert idx == tv.class_to_idx


def test_file_list_and_mixture(tmp_path):
    make_tree(str(tmp_path))
    with open(tmp_path / "list.csv", "w") as f:
        f.write("path,label,note\n")
        for i in range(6):
            f.write(f"cat/x.jpg,{i},n{i}\n")
    lst = de.source("files", list=str(tmp_path / "list.csv"))
    rows = list(lst.build(as_numpy=True))
    assert [int(b["label"]) for b in rows] == list(range(6))
    assert bytes(rows[2]["note"]) == b"n2"
    folder = de.source("files", root=str(tmp_path))
    mixed = de.source("sample", inputs=[lst.to_spec(), folder.to_spec()], weights=[1, 1],
                      stop="all")
    assert len(list(mixed.build(as_numpy=True))) == 6 + len(CLASSES) * 7


def test_files_sample_and_class_to_idx_by_name(tmp_path):
    for c in ("b", "a"):
        (tmp_path / c).mkdir()
        for i in range(3):
            (tmp_path / c / f"{i}.png").write_bytes(bytes([i]))
    assert de.class_to_idx(tmp_path) == {"a": 0, "b": 1}
    d = de.files(tmp_path)
    assert d.to_spec()["source"] == {"kind": "files", "root": str(tmp_path)}
    assert [int(b["label"]) for b in d.build(as_numpy=True)] == [0, 0, 0, 1, 1, 1]
    mixed = de.sample([d, de.files(tmp_path)], [1, 1], stop="all", seed=3)
    assert len(list(mixed.build(as_numpy=True))) == 12
