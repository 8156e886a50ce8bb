"""Topoformer encoder: relations vs brute force, input features, padding invariance, sizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched import batch_graphs, bucket_for, layered_graph, random_computation_graph
from gsched.core.padding import Bucket
from gsched.policies.topoformer import features as F
from gsched.policies.topoformer import model as M
from gsched.policies.topoformer import relations as R

SMALL = M.TopoformerConfig(num_layers=2, dim=16, heads_per_relation=2, head_dim=4)
GRAPHS = ([random_computation_graph(n, seed) for seed, n in enumerate((6, 11, 17))]
          + [layered_graph(n, seed) for seed, n in enumerate((9, 20))])


def _np_adjacency(g):
    a = np.zeros((g.num_ops, g.num_ops), bool)
    a[g.tensor_producer[g.edge_tensor], g.edge_consumer] = True
    return a


def _np_closure(a):
    n = a.shape[0]
    reach = a.copy()
    for k in range(n):  # Floyd–Warshall on booleans
        reach |= reach[:, k:k + 1] & reach[k:k + 1, :]
    return reach


def _laplacian(g):
    a = _np_adjacency(g)
    u = (a | a.T).astype(float)
    d = u.sum(1)
    scale = 1 / np.sqrt(np.maximum(d, 1))
    return np.diag((d > 0).astype(float)) - scale[:, None] * u * scale[None, :]


def _eigen_gap(g, k):
    """Smallest gap between the k + 2 lowest Laplacian eigenvalues (> 0: encodings are
    well defined up to sign, so padding cannot change them beyond float rounding)."""
    return np.min(np.diff(np.linalg.eigvalsh(_laplacian(g))[:k + 2]))


def _pad_bigger(graphs, bucket):
    return batch_graphs(graphs, Bucket(*(2 * x for x in bucket)))


def test_relations_match_brute_force_and_partition_the_pairs():
    bucket = bucket_for(GRAPHS)
    masks = jax.vmap(lambda g: R.relation_masks(g, R.RELATIONS))(batch_graphs(GRAPHS, bucket))
    bigger = jax.vmap(lambda g: R.relation_masks(g, R.RELATIONS))(_pad_bigger(GRAPHS, bucket))
    masks, bigger = np.asarray(masks), np.asarray(bigger)
    for b, g in enumerate(GRAPHS):
        n = g.num_ops
        a = _np_adjacency(g)
        c = _np_closure(a)
        tr = a & ~((a.astype(int) @ c.astype(int)) > 0)
        # Reduction by definition: an edge is kept iff no other path joins its ends.
        for i, j in zip(*np.nonzero(a)):
            others = a[i].copy()
            others[j] = False
            assert tr[i, j] == (not (others & c[:, j]).any())
        expected = {"tr_fwd": tr.T, "tr_bwd": tr, "dag_minus_tr_fwd": (a & ~tr).T,
                    "dag_minus_tr_bwd": a & ~tr, "closure_minus_dag_fwd": (c & ~a).T,
                    "closure_minus_dag_bwd": c & ~a,
                    "incomparable": ~c & ~c.T & ~np.eye(n, dtype=bool),
                    "dag_fwd": a.T, "dag_bwd": a, "dag_undirected": a | a.T,
                    "all": np.ones((n, n), bool)}
        for r, name in enumerate(R.RELATIONS):
            np.testing.assert_array_equal(masks[b, r, :n, :n], expected[name], err_msg=name)
            assert not masks[b, r, n:].any() and not masks[b, r, :, n:].any()
            np.testing.assert_array_equal(bigger[b, r, :n, :n], expected[name])
            assert not bigger[b, r, n:].any() and not bigger[b, r, :, n:].any()
        seven = masks[b, [R.RELATIONS.index(r) for r in R.TOPOLOGICAL_RELATIONS], :n, :n]
        np.testing.assert_array_equal(seven.sum(0) + np.eye(n, dtype=int), np.ones((n, n)))


def test_unknown_relation_and_encoder():
    with pytest.raises(ValueError, match="unknown relation"):
        R.check_relations(("tr_fwd", "sideways"))
    with pytest.raises(ValueError, match="unknown encoder"):
        M.TopoformerConfig(encoder="gcn")
    with pytest.raises(ValueError, match="dim"):
        M.TopoformerConfig(dim=0)


def _np_hops(g):
    """Min / max hops from a source and to a sink by brute force over all paths (tiny DAG)."""
    a = _np_adjacency(g)
    n = g.num_ops
    sources = [i for i in range(n) if not a[:, i].any()]
    sinks = [i for i in range(n) if not a[i].any()]
    paths = {}  # (i, j) -> lengths of all paths

    def walk(start, node, length):
        paths.setdefault((start, node), set()).add(length)
        for nxt in np.nonzero(a[node])[0]:
            walk(start, int(nxt), length + 1)

    for s in range(n):
        walk(s, s, 0)
    out = np.zeros((n, 4), int)
    for i in range(n):
        f = set().union(*(paths.get((s, i), set()) for s in sources))
        t = set().union(*(paths.get((i, k), set()) for k in sinks))
        out[i] = [min(f), max(f), min(t), max(t)]
    return out


def test_hop_distances_and_structural_features():
    graphs = GRAPHS[:4]
    bucket = bucket_for(graphs)
    hops = np.asarray(jax.jit(jax.vmap(F.hop_distances))(batch_graphs(graphs, bucket)))
    feats = np.asarray(jax.jit(jax.vmap(lambda g: F.node_features(g, 4)))(
        batch_graphs(graphs, bucket)))
    for b, g in enumerate(graphs):
        n = g.num_ops
        want = _np_hops(g)
        np.testing.assert_array_equal(hops[b, :n], want)
        assert not hops[b, n:].any()
        a = _np_adjacency(g)
        out_mem = np.bincount(g.tensor_producer, g.tensor_size, minlength=n)
        raw = np.concatenate([np.stack([out_mem, g.temporary_memory, a.sum(0), a.sum(1)], 1),
                              want], 1).astype(float)
        peak = raw.max(0)
        np.testing.assert_allclose(feats[b, :n, :8], raw / np.where(peak > 0, peak, 1),
                                   rtol=1e-6)
        assert not feats[b, n:].any()


def test_laplacian_encoding_is_an_eigenbasis_and_padding_invariant():
    graphs = [layered_graph(64, seed) for seed in (0, 1, 3)]
    bucket = bucket_for(graphs)
    pe_dim = 20
    small = np.asarray(jax.vmap(lambda g: F.laplacian_encoding(g, pe_dim))(
        batch_graphs(graphs, bucket)))
    big = np.asarray(jax.vmap(lambda g: F.laplacian_encoding(g, pe_dim))(
        _pad_bigger(graphs, bucket)))
    for b, g in enumerate(graphs):
        n = g.num_ops
        assert _eigen_gap(g, pe_dim) > 1e-3
        _, vectors = np.linalg.eigh(_laplacian(g))
        for k in range(pe_dim):
            ours = small[b, :n, k]
            ref = vectors[:, k + 1] * np.sign(vectors[np.argmax(np.abs(vectors[:, k + 1])), k + 1])
            np.testing.assert_allclose(ours, ref, atol=2e-4)
            assert ours[np.argmax(np.abs(ours))] > 0
        np.testing.assert_allclose(big[b, :n], small[b, :n], atol=2e-4)
        assert not small[b, n:].any() and not big[b, n:].any()


def test_tiny_graph_gets_zero_encoding_columns_and_sign_flip_keeps_structure():
    g = GRAPHS[0]  # 6 ops: 5 non-trivial eigenvectors, 15 zero columns
    pe = np.asarray(jax.vmap(lambda x: F.laplacian_encoding(x, 20))(
        batch_graphs([g], bucket_for(g)))[0])
    assert np.abs(pe[:6, :5]).max() > 0 and not pe[:, 5:].any()
    feats = jnp.ones((3, 8, 8 + 20))
    flipped = np.asarray(F.random_sign_flip(jax.random.key(0), feats))
    assert (flipped[..., :8] == 1).all()
    assert set(np.unique(flipped[..., 8:])) == {-1.0, 1.0}
    assert (flipped[:, :1] == flipped).all()  # one sign per graph and column


@pytest.mark.parametrize("encoder", ["mlp", "gat_forward_backward", "topoformer"])
def test_encoder_padding_invariance(encoder):
    config = M.TopoformerConfig(encoder=encoder, num_layers=2, dim=16, heads_per_relation=2,
                                head_dim=4)
    model = M.Topoformer(config, jax.random.key(1))
    graphs = [layered_graph(64, 3), layered_graph(64, 5)]
    assert all(_eigen_gap(g, config.pe_dim) > 1e-3 for g in graphs)
    bucket = bucket_for(graphs)

    @jax.jit
    def run(batch):
        inputs = jax.vmap(lambda g: M.graph_inputs(g, config))(batch)
        return (jax.vmap(model)(inputs),
                jax.vmap(model.embeddings)(inputs.features, inputs.masks))

    small, emb_small = run(batch_graphs(graphs, bucket))
    big, emb_big = run(_pad_bigger(graphs, bucket))
    for b, g in enumerate(graphs):
        n = g.num_ops
        np.testing.assert_allclose(np.asarray(big[b, :n]), np.asarray(small[b, :n]), atol=2e-3)
        np.testing.assert_allclose(np.asarray(emb_big[b, :n]), np.asarray(emb_small[b, :n]),
                                   atol=2e-3, rtol=1e-3)
        p = np.asarray(small[b])
        assert np.isfinite(p).all() and not p[n:].any()
        np.testing.assert_allclose([p[:n].mean(), p[:n].std()], [0, config.alpha], atol=1e-3)


def test_too_large_bucket_is_refused():
    config = M.TopoformerConfig(max_nodes=16)
    g = batch_graphs([layered_graph(20, 0)], None)
    with pytest.raises(ValueError, match=r"N=32 .*max_nodes=16"):
        jax.vmap(lambda x: M.graph_inputs(x, config))(g)
