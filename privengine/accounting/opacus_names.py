"""What a claim states about Opacus' accountants, importable without Opacus: their names, which of them may headline
a run, the caveat the approximate one carries, and the PRV accountant's error setting.

A process that only reads stored claims (the ledger, ``show``, the dashboard's pages) imports these from here;
:mod:`privengine.accounting.subsampled_gaussian`, which computes with the accountants, loads Opacus and with it
torch (about 3.5 s of CPU for a new process on this project's 2-core machine).
"""

ACCOUNTANT_NAMES = {
    "prv": "Opacus PRV accountant (Gopi, Lee & Wutschitz 2021)",
    "rdp": "Opacus RDP accountant (Mironov, Talwar & Zhang 2019)",
    "gdp": "Opacus GDP accountant (Dong, Roth & Su 2019; CLT approximation)",
}
SOUND_ACCOUNTANTS = ("prv", "rdp")  # the ones a run may headline; GDP is an approximation
GDP_CAVEAT = ("Not a bound: the GDP accountant is a central-limit approximation that underestimates epsilon "
              "(independent PLD accounting gives 2-10 % more on typical DP-SGD histories). Shown for comparison "
              "only; the headline claim is the one to rely on.")
PRV_EPS_ERROR = 0.01  # Opacus' default eps_error of PRVAccountant.get_epsilon, which epsilon_of uses
