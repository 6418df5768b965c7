"""Linear algebra beyond the sweep (the spec rows check every rule in both modes and at second
order): the tt.linalg namespace and NumPy's spellings, the results' types, the triangle eigh and
cholesky read, repeated eigen/singular values, norms at 0, and the errors users meet."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.specs import _invertible, _symmetric, matrices

L = tt.linalg
rng = np.random.default_rng(11)


def close(a, b, tol=1e-10):
    a = a.data if isinstance(a, tt.Tensor) else a
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def leaf(x):
    return tt.tensor(x, requires_grad=True)


# ----- the namespace and NumPy's spellings ---------------------------------------------------------
LINALG = ["inv", "solve", "det", "slogdet", "cholesky", "eigh", "eigvalsh", "svd", "svdvals", "norm",
          "vector_norm", "matrix_norm", "matrix_power", "multi_dot"]


def test_linalg_is_a_module_and_its_functions_are_not_top_level():
    assert L.__name__ == "tinytensor.linalg"
    for name in LINALG:
        assert callable(getattr(L, name))
        assert name in ("norm",) or not hasattr(tt, name), name   # as NumPy: np.inv does not exist
    for name in ["einsum", "tensordot", "outer", "inner", "kron", "dot"]:
        assert callable(getattr(tt, name)) and name in tt.__all__


SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
B = rng.standard_normal((3, 2))


@pytest.mark.parametrize("call", [
    lambda a: np.linalg.inv(a), lambda a: np.linalg.solve(a, B), lambda a: np.linalg.det(a),
    lambda a: np.linalg.slogdet(a)[1], lambda a: np.linalg.cholesky(a), lambda a: np.linalg.eigh(a)[0],
    lambda a: np.linalg.eigvalsh(a), lambda a: np.linalg.svd(a)[1], lambda a: np.linalg.norm(a, "nuc"),
    lambda a: np.linalg.norm(a, axis=0), lambda a: np.linalg.matrix_power(a, 3),
    lambda a: np.linalg.multi_dot([a, a, B]), lambda a: np.einsum("ij,jk", a, B),
    lambda a: np.tensordot(a, B, 1), lambda a: np.outer(a, B), lambda a: np.inner(a, a),
    lambda a: np.kron(a, B), lambda a: np.dot(2.0, a)])
def test_numpy_functions_on_a_tensor_record_tinytensors_version(call):
    a = leaf(SPD)
    out = call(a)
    assert isinstance(out, tt.Tensor) and out.requires_grad
    close(out, call(SPD))
    assert tt.gradcheck(call, SPD)


def test_results_are_named_tuples_with_numpys_field_names():
    a = leaf(SPD)
    sign, logabsdet = L.slogdet(a)
    result = L.slogdet(a)
    assert result.sign is not None and result.logabsdet.requires_grad
    assert not sign.requires_grad                  # the sign carries no gradient
    close(sign * np.exp(logabsdet.data), np.linalg.det(SPD))
    w, V = L.eigh(a)
    assert L.eigh(a).eigenvalues.shape == (3,) and L.eigh(a).eigenvectors.shape == (3, 3)
    close((V * w) @ V.T, SPD)
    U, S, Vh = L.svd(a)
    assert (L.svd(a).U.shape, L.svd(a).S.shape, L.svd(a).Vh.shape) == ((3, 3), (3,), (3, 3))
    close((U * S) @ Vh, SPD)


def test_plain_arrays_in_give_plain_arrays_out():
    assert isinstance(L.inv(SPD), np.ndarray)
    assert isinstance(L.eigh(SPD).eigenvectors, np.ndarray)
    assert not isinstance(tt.einsum("ii", SPD), tt.Tensor)
    close(L.svd(SPD, compute_uv=False), np.linalg.svd(SPD, compute_uv=False))


# ----- solve: NumPy 2's reading of b -------------------------------------------------------------
def test_solve_treats_a_1d_b_as_one_vector_and_anything_else_as_matrices():
    a = matrices(_invertible)(rng, (4, 3, 3))
    for b in [rng.standard_normal(3), rng.standard_normal((3, 2)), rng.standard_normal((4, 3, 1)),
              rng.standard_normal((2, 1, 3, 3))[..., :1]]:
        try:
            expected = np.linalg.solve(a, b)
        except ValueError:
            with pytest.raises(ValueError, match="solve"):
                L.solve(leaf(a), b)
            continue
        x = L.solve(leaf(a), leaf(b))
        assert x.shape == expected.shape
        close(x, expected)
    assert L.solve(leaf(a), rng.standard_normal(3)).shape == (4, 3)
    with pytest.raises(ValueError, match=r"b\[\.\.\., None\]"):
        L.solve(leaf(a), rng.standard_normal((4, 3)))   # NumPy 1's batch of vectors


# ----- eigh and cholesky read one triangle, as NumPy ---------------------------------------------
@pytest.mark.parametrize("UPLO", ["L", "U"])
def test_eigh_reads_one_triangle_and_its_gradient_lies_there(UPLO):
    s = matrices(_symmetric)(rng, (3, 3))
    garbage = s + (np.triu(np.ones((3, 3)), 1) if UPLO == "L" else np.tril(np.ones((3, 3)), -1)) * 7
    close(L.eigh(garbage, UPLO=UPLO)[0], np.linalg.eigh(garbage, UPLO=UPLO)[0])
    g = tt.grad(lambda a: tt.sum(L.eigh(a, UPLO=UPLO)[0] ** 3))(s)
    unread = np.triu(g, 1) if UPLO == "L" else np.tril(g, -1)
    assert np.all(unread == 0)
    # along a symmetric direction it is the symmetric gradient: d/dt f(s + tE) = <g, E>
    E = rng.standard_normal((3, 3))
    E = E + E.T
    f = lambda a: np.sum(np.linalg.eigh(a)[0] ** 3)
    numerical = (f(s + 1e-6 * E) - f(s - 1e-6 * E)) / 2e-6
    assert abs(np.sum(g * E) - numerical) < 1e-6


def test_eigh_takes_uplo_in_either_case_as_numpy():
    s = matrices(_symmetric)(rng, (3, 3)) + np.triu(np.ones((3, 3)), 1)
    close(L.eigh(leaf(s), UPLO="u")[0], np.linalg.eigh(s, UPLO="u")[0])
    g = tt.grad(lambda a: tt.sum(L.eigvalsh(a, UPLO="u") ** 3))(s)
    assert np.all(np.tril(g, -1) == 0)


def test_cholesky_reads_the_lower_triangle_and_upper_is_its_transpose():
    garbage = SPD + np.triu(np.ones((3, 3)), 1) * 5
    close(L.cholesky(leaf(garbage)), np.linalg.cholesky(garbage))
    close(L.cholesky(leaf(SPD), upper=True), np.linalg.cholesky(SPD, upper=True))
    g = tt.grad(lambda a: tt.sum(L.cholesky(a) ** 2))(SPD)
    assert np.all(np.triu(g, 1) == 0)


# ----- repeated eigen and singular values ---------------------------------------------------------
def test_repeated_eigenvalues_give_finite_exact_gradients_for_eigenvalue_functions():
    a = 2 * np.eye(3)
    close(tt.grad(lambda x: tt.sum(L.eigh(x)[0]))(a), np.eye(3))          # d trace = I
    close(tt.grad(lambda x: tt.sum(L.eigh(x)[0] ** 2))(a), 4 * np.eye(3))  # d |A|_F^2 = 2A
    # through the eigenvectors: finite (the terms between equal eigenvalues are dropped)
    g = tt.grad(lambda x: tt.sum(L.eigh(x)[1] ** 3))(a)
    assert np.all(np.isfinite(g))
    out, tangent = tt.jvp(lambda x: L.eigh(x)[0], (a,), (np.diag([1.0, 2.0, 3.0]),))
    close(tangent, [1.0, 2.0, 3.0])


def test_repeated_and_zero_singular_values_give_finite_gradients():
    close(tt.grad(lambda x: L.norm(x, "nuc"))(np.eye(3)), np.eye(3))         # d |A|_* = U V^T
    for x in [np.zeros((3, 2)), np.zeros((2, 3)), np.ones((3, 3))]:
        for f in [lambda a: L.norm(a, "nuc"), lambda a: tt.sum(L.svd(a, full_matrices=False)[0])]:
            assert np.all(np.isfinite(tt.grad(f)(x)))


def test_svd_full_matrices_of_a_non_square_matrix_has_no_gradient():
    a = rng.standard_normal((4, 2))
    with pytest.raises(ValueError, match="full_matrices=False"):
        L.svd(leaf(a))
    U, S, Vh = L.svd(tt.tensor(a))                 # no gradient needed: NumPy's full result
    assert U.shape == (4, 4) and Vh.shape == (2, 2) and not U.requires_grad
    with tt.no_grad():
        assert L.svd(leaf(a)).U.shape == (4, 4)
    assert L.svd(leaf(a), compute_uv=False).requires_grad
    assert L.svd(leaf(a), full_matrices=False).U.shape == (4, 2)
    assert tt.gradcheck(lambda x: tt.sum(L.svd(x)[1]), a[:2])   # square: full is reduced


# ----- norms ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("ord, axis", [(None, None), (None, 1), (2, 0), (3, 1), (1, 1), (np.inf, 0),
                                       ("fro", None), ("fro", (0, 1)), (1, None), (np.inf, None)])
def test_norm_gradient_at_zero_is_zero(ord, axis):
    g = tt.grad(lambda x: tt.sum(L.norm(x, ord=ord, axis=axis)))(np.zeros((2, 3)))
    assert np.array_equal(g, np.zeros((2, 3)))
    h = tt.hvp(lambda x: tt.sum(L.norm(x, ord=ord, axis=axis)), (np.zeros((2, 3)),), (np.ones((2, 3)),))
    assert np.all(np.isfinite(h))


def test_norm_zero_counts_nonzeros_without_gradient():
    x = np.array([[0.0, 2.0, -1.0], [0.0, 0.0, 3.0]])
    n = L.norm(leaf(x), 0, axis=1)
    close(n, np.linalg.norm(x, 0, axis=1))
    assert not n.requires_grad and n.dtype == np.float64
    assert L.norm(leaf(x.astype(np.float32)), 0, axis=0).dtype == np.float32


@pytest.mark.parametrize("x", [np.arange(6.0).reshape(2, 3) - 2, np.arange(24.0).reshape(2, 3, 4) - 5])
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm_matches_numpy_for_every_order_axis_and_keepdims(x, keepdims):
    vector = [None, 0, 1, 2, 3, -1, 0.5, np.inf, -np.inf]
    matrix = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]
    cases = [(o, a) for o in vector for a in range(-x.ndim, x.ndim)]
    cases += [(o, (a, b)) for o in matrix for a in range(x.ndim) for b in range(-x.ndim, 0)
              if a != b % x.ndim]
    if x.ndim == 2:
        cases += [(o, None) for o in matrix]
    for ord, axis in cases:
        with np.errstate(divide="ignore"):   # negative orders of a 0 entry, in both
            expected = np.linalg.norm(x, ord, axis, keepdims)
            got = L.norm(tt.tensor(x), ord, axis, keepdims)
        assert got.shape == expected.shape, (ord, axis)
        close(got, expected, 1e-9)


def test_norm_keeps_float32_and_takes_integers():
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    for ord, axis in [(None, None), (3, 1), ("nuc", None), (np.inf, None), (None, (1, 0))]:
        assert L.norm(leaf(x), ord, axis).dtype == np.float32
    close(L.norm(np.arange(4)), np.linalg.norm(np.arange(4)))


@pytest.mark.parametrize("call, match", [
    (lambda: L.norm(np.ones(3), "fro"), "invalid norm order 'fro' for vectors"),
    (lambda: L.norm(np.ones((2, 2)), 3), "invalid norm order 3 for matrices"),
    (lambda: L.norm(np.ones((2, 2, 2)), 1), "improper number of dimensions"),
    (lambda: L.norm(np.ones((2, 2)), axis=(1, -1)), "duplicate axes"),
    (lambda: L.norm(np.ones((2, 2, 2)), axis=(0, 1, 2)), "improper number of dimensions"),
])
def test_norm_errors_name_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----- einsum --------------------------------------------------------------------------------------
def test_einsum_implicit_output_follows_numpy_including_case_and_ellipsis():
    x, y = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 3, 2))
    for spec, z in [("bAc", x), ("Abc", x), ("...b", x), ("b...", x), ("abc->cba", x), ("a...->...a", x),
                    ("iij", y), ("j...jj->...j", rng.standard_normal((2, 3, 2, 2)))]:
        close(tt.einsum(spec, leaf(z)), np.einsum(spec, z))


def test_einsum_same_tensor_twice_and_integer_constants():
    x = leaf(rng.standard_normal(4))
    (tt.einsum("i,i", x, x)).backward()
    close(x.grad, 2 * x.data)
    counts = np.arange(4)                                # an integer constant operand: no gradient
    y = tt.einsum("i,i->", x, counts)
    close(y, x.data @ counts)
    x.zero_grad()
    y.backward()
    close(x.grad, counts)


def test_einsum_interleaved_form():
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    close(tt.einsum(leaf(a), [0, 1], leaf(b), [1, 2], [0, 2]), a @ b)
    close(tt.einsum(leaf(a), [0, 1], leaf(b), [1, 2]), a @ b)
    close(tt.einsum(leaf(a), [Ellipsis, 1], [Ellipsis]), a.sum(1))


@pytest.mark.parametrize("call, match", [
    (lambda: tt.einsum("ij,jk->ik", np.ones((2, 3))), "names 2 operand"),
    (lambda: tt.einsum("ijk", np.ones((2, 3))), r"operand 0 has shape \(2, 3\)"),
    (lambda: tt.einsum("...i->i", np.ones((2, 3))), "write '...' in the output"),
    (lambda: tt.einsum("ij,jk->ik", leaf(np.ones((2, 3))), np.ones((4, 2))), "einsum"),
])
def test_einsum_errors_name_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()
    with pytest.raises(TypeError, match="no subscripts"):
        tt.einsum()


# ----- products ----------------------------------------------------------------------------------
def test_dot_takes_0d_operands_as_numpy_and_stays_one_tape_entry():
    x = leaf(rng.standard_normal((2, 3)))
    for a, b in [(2.0, x), (x, np.float64(3.0)), (leaf(np.array(2.0)), x)]:
        out = tt.dot(a, b)
        close(out, np.dot(getattr(a, "data", a), getattr(b, "data", b)))
        assert out._prim.name == "dot"
    assert tt.dot(x, np.ones((4, 3, 2))).shape == (2, 4, 2)   # N-D, as np.dot


def test_tensordot_errors_and_axes_forms():
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 3, 5))
    for axes in [([1, 2], [1, 0]), ((2, 1), (0, 1)), [[-1], [0]], 0]:
        close(tt.tensordot(leaf(a), b, axes), np.tensordot(a, b, axes))
    with pytest.raises(ValueError, match="shape-mismatch"):
        tt.tensordot(a, b, 2)
    with pytest.raises(ValueError, match="axes=4"):
        tt.tensordot(a, b, 4)


def test_kron_outer_inner_match_numpy_on_mixed_ranks():
    for a, b in [(rng.standard_normal((2, 3)), rng.standard_normal(2)),
                 (np.array(2.0), rng.standard_normal(3)),
                 (rng.standard_normal((2, 1, 2)), rng.standard_normal((3, 2)))]:
        close(tt.kron(leaf(a), b), np.kron(a, b))
        close(tt.outer(a, leaf(b)), np.outer(a, b))
        if a.ndim == 0 or a.shape[-1] == b.shape[-1]:
            close(tt.inner(leaf(a), b), np.inner(a, b))


# ----- errors and edges ------------------------------------------------------------------------------
def test_complex_matrices_are_refused():
    with pytest.raises(TypeError, match="complex"):
        L.inv(tt.tensor(np.eye(2) * (1 + 1j)))


def test_singular_matrix_errors_name_the_op():
    singular = np.ones((2, 2))
    with pytest.raises(np.linalg.LinAlgError, match="inv"):
        L.inv(leaf(singular))
    with pytest.raises(np.linalg.LinAlgError, match="tape entry det"):
        tt.grad(L.det)(singular)                  # det is 0, but its gradient needs the inverse
    with pytest.raises(np.linalg.LinAlgError, match="cholesky"):
        L.cholesky(leaf(-np.eye(2)))


def test_float32_stays_float32_through_the_decompositions():
    a = matrices(_symmetric)(rng, (3, 3)).astype(np.float32) + 4 * np.eye(3, dtype=np.float32)
    for f in [L.inv, L.det, lambda x: L.slogdet(x)[1], L.cholesky, lambda x: L.eigh(x)[1],
              lambda x: L.svd(x)[0], lambda x: L.norm(x, "nuc"), lambda x: tt.einsum("ij,jk", x, x)]:
        x = leaf(a)
        y = f(x)
        assert y.dtype == np.float32
        tt.sum(y).backward()
        assert x.grad.dtype == np.float32


def test_empty_batches_and_1x1_matrices():
    close(L.inv(leaf(np.full((1, 1), 4.0))), [[0.25]])
    close(tt.grad(L.det)(np.full((1, 1), 4.0)), [[1.0]])
    assert L.eigh(leaf(np.zeros((0, 2, 2)))).eigenvalues.shape == (0, 2)


def test_random_einsums_match_numpy_and_central_differences():
    """Random subscripts: repeated letters within and across operands, summed-out and kept
    indices, '...' with size-1 broadcasting, 1 to 3 operands."""
    r = np.random.default_rng(5)
    sizes = dict(zip("abcde", [2, 3, 2, 1, 3]))
    checked = 0
    while checked < 25:
        subs, operands = [], []
        ellipsis = r.random() < 0.3
        for _ in range(r.integers(1, 4)):
            s = "".join(r.choice(list("abcde"), r.integers(0, 4)))
            shape = [sizes[c] for c in s]
            if ellipsis:
                s, shape = "..." + s, list(r.choice([1, 2], r.integers(0, 3))) + shape
            subs.append(s)
            operands.append(r.standard_normal(shape))
        spec = ",".join(subs)
        if r.random() < 0.5:
            letters = sorted(set("".join(subs).replace(".", "")))
            spec += "->" + ("..." if ellipsis else "") + "".join(r.permutation(letters)[:r.integers(0, 3)])
        try:
            expected = np.einsum(spec, *operands)
        except ValueError:
            continue
        close(tt.einsum(spec, *[leaf(x) for x in operands]), expected)
        assert tt.gradcheck(lambda *xs, spec=spec: tt.einsum(spec, *xs), *operands)
        checked += 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matmul_vjp_with_one_output_column_is_the_outer_product_of_the_gemm(dtype):
    """g @ b^T with b of one column (a network's single output) is computed as one broadcast
    multiply: the same single products as the GEMM, bit for bit, at any batch rank."""
    r = np.random.default_rng(5)
    for a_shape, b_shape in [((7, 4), (4, 1)), ((3, 7, 4), (4, 1)), ((3, 7, 4), (3, 4, 1))]:
        a = leaf(r.standard_normal(a_shape).astype(dtype))
        b = leaf(r.standard_normal(b_shape).astype(dtype))
        g = r.standard_normal(np.broadcast_shapes(a_shape[:-1], b_shape[:-2] + (1,))[:-1]
                              + a_shape[-2:-1] + (1,)).astype(dtype)
        (a @ b).backward(g)
        expected = np.matmul(g, np.swapaxes(b.data, -1, -2))
        assert a.grad.dtype == dtype
        np.testing.assert_array_equal(a.grad, expected)
