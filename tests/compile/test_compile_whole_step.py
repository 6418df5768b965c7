"""A whole training step compiled (issue 29, item 4): backward(), zero_grad, clipping, the
optimizer's and the scheduler's steps inside tt.compile, equal to the same step run eagerly bit
for bit (loss, parameters, .grad, optimizer state, learning rate) over many calls, with one
recording; and the refusals, each naming the fix."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn, optim

OPTIMIZERS = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.1),
    "momentum": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    "nesterov-wd": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "adam": lambda ps: optim.Adam(ps, lr=0.01),
    "adamw-amsgrad": lambda ps: optim.AdamW(ps, lr=0.01, amsgrad=True),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5),
}
SCHEDULERS = {
    None: None,
    "step": lambda o: optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    "cosine": lambda o: optim.lr_scheduler.CosineAnnealingLR(o, T_max=5),
    "chained": lambda o: optim.lr_scheduler.ChainedScheduler(
        [optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5), optim.lr_scheduler.ExponentialLR(o, 0.9)]),
    "sequential": lambda o: optim.lr_scheduler.SequentialLR(
        o, [optim.lr_scheduler.LinearLR(o, 0.5, total_iters=2), optim.lr_scheduler.ExponentialLR(o, 0.9)],
        milestones=[3]),
}
CLIPS = {None: None, "norm": lambda ps: nn.utils.clip_grad_norm_(ps, 0.5),
         "value": lambda ps: nn.utils.clip_grad_value_(ps, 0.05)}


def model(dtype=np.float64):
    return nn.Sequential(nn.Linear(4, 8, rng=0, dtype=dtype), nn.Tanh(), nn.Linear(8, 3, rng=1, dtype=dtype))


def data(n=12, dtype=np.float64):
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((5, 4)).astype(dtype), rng.integers(0, 3, 5)) for _ in range(n)]


def build(opt_name, sched_name=None, clip=None, zero_first=True, dtype=np.float64):
    m = model(dtype)
    opt = OPTIMIZERS[opt_name](m.parameters())
    sched = SCHEDULERS[sched_name](opt) if sched_name else None
    loss_fn = nn.CrossEntropyLoss()

    def train_step(x, y):
        if zero_first:
            opt.zero_grad()
        loss = loss_fn(m(x), y)
        loss.backward()
        if clip:
            CLIPS[clip](m.parameters())
        opt.step()
        if not zero_first:
            m.zero_grad()
        if sched is not None:
            sched.step()
        return loss
    return m, opt, train_step


def assert_same(m1, o1, m2, o2, what):
    for (name, p), q in zip(m1.named_parameters(), m2.parameters()):
        assert np.array_equal(p.data, q.data), f"{what}: {name}"
        assert (p.grad is None) == (q.grad is None), f"{what}: {name}.grad"
        if p.grad is not None:
            assert np.array_equal(p.grad, q.grad), f"{what}: {name}.grad"
    assert [g["lr"] for g in o1.param_groups] == [g["lr"] for g in o2.param_groups], what
    s1, s2 = o1.state_dict()["state"], o2.state_dict()["state"]
    assert s1.keys() == s2.keys(), what
    for k in s1:
        for name, v in s1[k].items():
            assert np.array_equal(np.asarray(v), np.asarray(s2[k][name])), f"{what}: state {k} {name}"


@pytest.mark.parametrize("opt_name", OPTIMIZERS)
@pytest.mark.parametrize("sched_name", SCHEDULERS)
@pytest.mark.parametrize("clip", CLIPS)
def test_a_whole_step_equals_eager_bit_for_bit(opt_name, sched_name, clip):
    m1, o1, eager = build(opt_name, sched_name, clip)
    m2, o2, step = build(opt_name, sched_name, clip)
    step = tt.compile(step)
    for i, (x, y) in enumerate(data()):
        a, b = eager(x, y), step(x, y)
        assert isinstance(b, tt.Tensor) and b.requires_grad and b.dtype == a.dtype
        assert np.array_equal(a.data, b.data), f"call {i}: loss"
        assert_same(m1, o1, m2, o2, f"call {i}")
    assert step.recompiles == ["the first call"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zero_grad_after_the_step_and_float32(dtype):
    m1, o1, eager = build("momentum", zero_first=False, dtype=dtype)
    m2, o2, step = build("momentum", zero_first=False, dtype=dtype)
    step = tt.compile(step)
    for i, (x, y) in enumerate(data(6, dtype)):
        assert np.array_equal(eager(x, y).data, step(x, y).data)
        assert_same(m1, o1, m2, o2, f"call {i}")


def test_gradients_accumulate_over_calls_without_zero_grad():
    """No zero_grad inside: .grad sums over calls, as eagerly (the program reads .grad each call)."""
    def make():
        w = tt.tensor(np.array([1.0, -2.0, 0.5]), requires_grad=True)

        def f(x):
            loss = ((w * x) ** 2).sum()
            loss.backward()
            return loss
        return w, f
    w1, eager = make()
    w2, f = make()
    f = tt.compile(f)
    for k in range(5):
        x = np.arange(3.0) + k
        assert np.array_equal(eager(x).data, f(x).data)
        assert np.array_equal(w1.grad, w2.grad)
    w1.grad = w2.grad = None                      # zeroed outside: starts again
    assert np.array_equal(eager(np.ones(3)).data, f(np.ones(3)).data)
    assert np.array_equal(w1.grad, w2.grad)


def test_state_changes_outside_between_calls_are_seen():
    """The lr set by hand, a load_state_dict, a parameter rebound: read when the lines run."""
    m1, o1, eager = build("adam")
    m2, o2, step = build("adam")
    step = tt.compile(step)
    batches = data(9)
    for i, (x, y) in enumerate(batches):
        if i == 3:
            for o in (o1, o2):
                o.param_groups[0]["lr"] = 0.5
        if i == 5:
            saved = o1.state_dict()
            o1.load_state_dict(saved)
            o2.load_state_dict(saved)
        if i == 7:
            for m in (m1, m2):
                m[0].weight.data = m[0].weight.data * 0.5
        assert np.array_equal(eager(x, y).data, step(x, y).data), f"call {i}"
        assert_same(m1, o1, m2, o2, f"call {i}")


def test_the_recording_call_steps_once():
    """The first call records f (running its step) and puts the step back; the program's run makes
    it: one step, not two, and the optimizer's step count is 1."""
    m, o, step = build("adam")
    before = [p.data.copy() for p in m.parameters()]
    x, y = data(1)[0]
    tt.compile(step)(x, y)
    m_e, o_e, eager = build("adam")
    eager(x, y)
    for p, q in zip(m.parameters(), m_e.parameters()):
        assert np.array_equal(p.data, q.data)
    assert all(not np.array_equal(p.data, b) for p, b in zip(m.parameters(), before))
    assert all(s["step"] == 1 for s in o.state.values())


def test_a_value_guard_before_the_step_picks_the_program():
    """A branch on the loss before backward() is guarded (each outcome its own program)."""
    def make():
        w = tt.tensor(np.array([1.0, 2.0]), requires_grad=True)
        opt = optim.SGD([w], lr=0.1)

        def f(x):
            opt.zero_grad()
            loss = (w * x).sum() ** 2
            if loss > 4:
                loss = loss * 0.5
            loss.backward()
            opt.step()
            return loss
        return w, f
    w1, eager = make()
    w2, f = make()
    f = tt.compile(f)
    for x in ([1.0, 1.0], [0.1, 0.1], [2.0, 0.0], [0.3, -0.1], [1.0, 1.0]):
        x = np.array(x)
        assert np.array_equal(eager(x).data, f(x).data)
        assert np.array_equal(w1.data, w2.data) and np.array_equal(w1.grad, w2.grad)
    assert len(f.recompiles) == 2


def test_a_second_backward_through_the_result_is_refused():
    m, o, step = build("sgd")
    loss = tt.compile(step)(*data(1)[0])
    with pytest.raises(RuntimeError, match="second backward"):
        loss.backward()


@pytest.mark.parametrize("case", ["item_after_step", "closure", "plateau_metric", "leaf_made_inside",
                                  "lr_set_inside"])
def test_refusals_name_the_fix(case):
    w = tt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    plateau = optim.lr_scheduler.ReduceLROnPlateau(opt)

    def f(x, lr=0.05):
        opt.zero_grad()
        loss = ((w * x) ** 2).sum()
        if case == "leaf_made_inside":
            v = tt.tensor(np.ones(2), requires_grad=True)
            loss = loss + (v * x).sum()
        if case == "lr_set_inside":
            opt.param_groups[0]["lr"] = lr
        loss.backward()
        if case == "closure":
            opt.step(lambda: loss)
        else:
            opt.step()
        if case == "plateau_metric":
            plateau.step(loss)
        return loss.item() if case == "item_after_step" else loss
    fix = {"item_after_step": r"\.item\(\) after the call", "closure": "closure's body",
           "plateau_metric": "Call it outside", "leaf_made_inside": "Make it before the call",
           "lr_set_inside": "changed the settings of SGD"}[case]
    before = w.data.copy()
    with pytest.raises(RuntimeError, match=fix):
        tt.compile(f)(np.ones(2))
    if case in ("item_after_step", "leaf_made_inside"):   # refused after f ran: put back
        assert np.array_equal(w.data, before)


def test_ddp_on_several_ranks_is_refused(monkeypatch):
    """DistributedDataParallel averages gradients after backward() on several ranks: the program
    would not. (In one process its hook does nothing: a whole step there compiles.)"""
    from tinytensor import distributed
    m = nn.Linear(2, 1, rng=0)
    ddp = nn.parallel.DistributedDataParallel(m)
    opt = optim.SGD(ddp.parameters(), lr=0.1)

    def f(x):
        opt.zero_grad()
        loss = (ddp(x) ** 2).sum()
        loss.backward()
        opt.step()
        return loss
    m2 = nn.Linear(2, 1, rng=0)
    opt2 = optim.SGD(m2.parameters(), lr=0.1)
    step = tt.compile(f)
    for k in range(3):
        x = np.ones((3, 2)) * (k + 1)
        opt2.zero_grad()
        (m2(x) ** 2).sum().backward()
        opt2.step()
        step(x)
        assert np.array_equal(m.weight.data, m2.weight.data)
    monkeypatch.setattr(distributed._STATE, "size", 2)
    with pytest.raises(RuntimeError, match="DistributedDataParallel"):
        tt.compile(f)(np.ones((3, 2)))


def test_the_constant_seed_is_never_handed_over_as_a_grad():
    """loss = b + ...: b's gradient is the seed itself, a constant of the program; eagerly it is
    copied into b.grad, and it must be here too, or clipping in place would change the constant."""
    def make():
        b = tt.tensor(np.array(0.5), requires_grad=True)
        w = tt.tensor(np.array([1.0, 2.0]), requires_grad=True)
        opt = optim.SGD([b, w], lr=0.1)

        def f(x):
            opt.zero_grad()
            loss = b + (w * x).sum()
            loss.backward()
            nn.utils.clip_grad_norm_([b, w], 0.1)
            opt.step()
            return loss
        return b, w, f
    b1, w1, eager = make()
    b2, w2, f = make()
    f = tt.compile(f)
    for k in range(4):
        x = np.array([1.0, -1.0]) * (k + 1)
        assert np.array_equal(eager(x).data, f(x).data)
        assert np.array_equal(b1.grad, b2.grad) and np.array_equal(w1.data, w2.data)


def test_the_program_shows_the_step_lines():
    m, o, step = build("sgd")
    step = tt.compile(step)
    step(*data(1)[0])
    src = step.source
    assert "optimizer.zero_grad(), on every call" in src and "optimizer.step(), on every call" in src
    assert "backward(): each leaf's .grad, on every call" in src


def test_a_value_read_after_backward_that_depends_on_the_arguments_alone_is_checked_first():
    """Two microbatches in one step: the second cross-entropy tests its labels for ignore_index
    (a value read into Python after the first backward()). It depends on the arguments alone,
    so the program checks it before the step begins; a batch with an ignored label takes the
    other program."""
    def make():
        m = nn.Linear(4, 3, rng=0)
        opt = optim.SGD(m.parameters(), lr=0.1)
        ce = nn.CrossEntropyLoss()

        def step(x1, y1, x2, y2):
            opt.zero_grad()
            ce(m(x1), y1).backward()
            loss = ce(m(x2), y2)
            loss.backward()
            opt.step()
            return loss
        return m, step
    m1, eager = make()
    m2, step = make()
    step = tt.compile(step)
    rng = np.random.default_rng(0)
    for i in range(8):
        x1, x2 = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
        y1, y2 = rng.integers(0, 3, 5), rng.integers(0, 3, 5)
        if i in (2, 3, 6):
            y2[1] = -100
        assert np.array_equal(eager(x1, y1, x2, y2).data, step(x1, y1, x2, y2).data), i
        assert np.array_equal(m1.weight.data, m2.weight.data)
        assert np.array_equal(m1.weight.grad, m2.weight.grad)
    assert len(step.recompiles) == 2


def test_a_value_read_after_the_step_from_the_parameters_is_refused():
    w = tt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    opt = optim.SGD([w], lr=0.1)

    def f(x):
        opt.zero_grad()
        (w * x).sum().backward()
        opt.step()
        return w * 2 if w.sum() > 0 else w      # the updated parameters: no program can check first
    with pytest.raises(RuntimeError, match="read it before backward"):
        tt.compile(f)(np.ones(2))


def test_state_read_through_a_schedulers_methods_is_guarded():
    """sched.get_last_lr() reads attributes f's code never names: the program returned the first
    call's learning rate (a silent difference); the scheduler's state is now guarded whole, so
    each scheduled change records again (eager's numbers; past the limit, eagerly)."""
    def make():
        w = tt.tensor(np.ones(3), requires_grad=True)
        opt = optim.SGD([w], lr=0.1)
        sched = optim.lr_scheduler.StepLR(opt, 1, 0.5)

        def step(x):
            scale = sched.get_last_lr()[0]
            opt.zero_grad()
            loss = (w * x).sum() * scale
            loss.backward()
            opt.step()
            sched.step()
            return loss, scale
        return w, step
    w1, eager = make()
    w2, step = make()
    step = tt.compile(step)
    for k in range(6):
        (a, lr_a), (b, lr_b) = eager(np.ones(3)), step(np.ones(3))
        assert lr_a == lr_b and np.array_equal(a.data, b.data) and np.array_equal(w1.data, w2.data), k


@pytest.mark.parametrize("read", ["get_last_lr", "param_groups"])
def test_a_learning_rate_read_after_the_schedulers_step_is_refused(read):
    """Round 10: the value a scheduler sets on this call, read after its step inside (to log or
    to use), is what the program cannot read again: it returned the recording call's learning
    rate on the calls where StepLR changed it. Refused, naming the fix."""
    w = tt.tensor(np.ones(3), requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, 2, 0.5)

    def step(x):
        opt.zero_grad()
        (w * x).sum().backward()
        opt.step()
        sched.step()
        return sched.get_last_lr()[0] if read == "get_last_lr" else opt.param_groups[0]["lr"]
    with pytest.raises(RuntimeError, match="after a scheduler's step"):
        tt.compile(step)(np.ones(3))
    assert opt.param_groups[0]["lr"] == 0.1 and type(opt.param_groups) is list   # put back

# ----- the step's lines written out (issue 29's speed work) ----------------------------------------
def test_fresh_gradients_are_handed_over_and_each_call_makes_new_ones():
    """backward()'s accumulation after zero_grad is a line handing each fresh gradient over as the
    leaf's .grad (codegen._handed_over): a .grad kept from the last call is never written into,
    and two leaves never share one array, as eagerly."""
    m1, o1, eager = build("sgd")
    m2, o2, step = build("sgd")
    step = tt.compile(step)
    kept = []
    for i, (x, y) in enumerate(data(5)):
        assert np.array_equal(eager(x, y).data, step(x, y).data), f"call {i}"
        assert_same(m1, o1, m2, o2, f"call {i}")
        grads = [p.grad for p in m2.parameters()]
        assert len({id(g) for g in grads}) == len(grads)
        assert not any(g is k for g in grads for k in kept)
        kept += [(g, g.copy()) for g in grads]
    assert all(np.array_equal(g, copy) for g, copy in kept[:-4])   # earlier calls' .grad untouched
    assert "a fresh gradient becomes a .grad that is None" in step.source


def test_a_grad_set_between_calls_takes_the_general_accumulation():
    """A .grad that is not None when the line runs (no zero_grad in f, a .grad set by hand between
    calls) is summed into, as eagerly (tape.accumulate), by the same line's other branch."""
    def make():
        w = tt.tensor(np.array([1.0, -2.0, 0.5]), requires_grad=True)
        v = tt.tensor(np.array([0.5, 0.25]), requires_grad=True)
        opt = optim.SGD([w, v], lr=0.1)

        def f(x):
            loss = ((w * x) ** 2).sum() + (v * v).sum() * x.sum()
            loss.backward()
            opt.step()
            return loss
        return w, v, f
    w1, v1, eager = make()
    w2, v2, f = make()
    f = tt.compile(f)
    for k in range(6):
        if k == 3:
            w1.grad, w2.grad = np.full(3, 0.5), np.full(3, 0.5)
        if k == 4:
            v1.grad = v2.grad = None
        x = np.arange(3.0) - k
        assert np.array_equal(eager(x).data, f(x).data), f"call {k}"
        for a, b in ((w1, w2), (v1, v2)):
            assert np.array_equal(a.data, b.data) and np.array_equal(a.grad, b.grad), f"call {k}"
    assert w2.grad is not v2.grad


def test_one_gradient_array_for_two_leaves_is_copied_as_eagerly():
    """loss = (a + b).sum(): add's VJP passes one array to both leaves; eagerly the second leaf
    gets a copy, and so it does here (no hand-over line for it: _Accumulate decides)."""
    def make():
        a = tt.tensor(np.array([1.0, 2.0]), requires_grad=True)
        b = tt.tensor(np.array([3.0, 4.0]), requires_grad=True)
        opt = optim.SGD([a, b], lr=0.1)

        def f(x):
            opt.zero_grad()
            loss = ((a + b) * x).sum()
            loss.backward()
            opt.step()
            return loss
        return a, b, f
    a1, b1, eager = make()
    a2, b2, f = make()
    f = tt.compile(f)
    for k in range(4):
        x = np.array([1.0, -1.0]) * (k + 1)
        assert np.array_equal(eager(x).data, f(x).data)
        assert a2.grad is not b2.grad
        for p, q in ((a1, a2), (b1, b2)):
            assert np.array_equal(p.data, q.data) and np.array_equal(p.grad, q.grad)


def test_the_optimizer_methods_are_called_as_they_are_now():
    """optimizer.step() and zero_grad() are program lines calling the bound methods (no _Call
    layer): a learning rate, momentum or parameter group changed between calls is read by them."""
    m1, o1, eager = build("sgd")
    m2, o2, step = build("sgd")
    step = tt.compile(step)
    for i, (x, y) in enumerate(data(8)):
        if i == 2:
            for o in (o1, o2):
                o.param_groups[0]["lr"] = 0.03
        if i == 4:
            for o in (o1, o2):
                o.param_groups[0]["momentum"] = 0.5
        if i == 6:
            for o in (o1, o2):
                o.param_groups[0]["params"] = o.param_groups[0]["params"][:2]
        assert np.array_equal(eager(x, y).data, step(x, y).data), f"call {i}"
        assert_same(m1, o1, m2, o2, f"call {i}")
    assert step.traces == 1


@pytest.mark.parametrize("returns", ["loss", "pair"])
def test_the_loss_of_a_whole_step_is_a_number_to_log_on_every_call(returns):
    """float(loss) after a compiled whole step whose backward() ran inside is allowed, as eagerly,
    on every call: the loss alone says so through its tape entry (taped._Spent.backward_done, made
    by the program's return line), a loss among other results is marked one by one."""
    m1, o1, eager = build("sgd")
    m2, o2, step = build("sgd")

    def pair(f):
        return lambda x, y: (f(x, y), tt.tensor(np.ones(2)))
    eager, step = (pair(eager), tt.compile(pair(step))) if returns == "pair" else (eager, tt.compile(step))
    for i, (x, y) in enumerate(data(4)):
        a, b = eager(x, y), step(x, y)
        if returns == "pair":
            a, b = a[0], b[0]
        assert float(a) == float(b) and f"{a.item():.6f}" == f"{b.item():.6f}", f"call {i}"
        assert_same(m1, o1, m2, o2, f"call {i}")
    if returns == "loss":
        assert "make_tensor(" in step.source


def test_a_compiled_loss_whose_backward_runs_outside_is_not_a_number_yet():
    """The loss of a compiled forward (backward() called outside) still refuses float() under grad
    mode before its backward, as eagerly: its entry does not say backward_done."""
    m = model()
    loss_fn = nn.CrossEntropyLoss()
    f = tt.compile(lambda x, y: loss_fn(m(x), y))
    x, y = data(1)[0]
    for _ in range(2):
        loss = f(x, y)
        with pytest.raises(TypeError, match="cannot be converted to a Python number"):
            float(loss)
        loss.backward()
        float(loss)


def test_a_logging_gradient_hook_on_a_closed_over_tensor_is_refused():
    """A gradient hook with a Python side effect on a Tensor f closes over (not a Module's
    parameter) ran once, while recording, and never on the program's calls: now its closure is
    walked, so the change it makes is refused, naming the fix."""
    w = tt.tensor(np.ones(3), requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(1) or g)

    def step(x):
        loss = tt.sum(w * x)
        loss.backward()
        return loss
    with pytest.raises(RuntimeError, match="changed Python state"):
        tt.compile(step)(np.ones(3))
