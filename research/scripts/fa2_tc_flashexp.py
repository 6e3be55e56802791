"""fa2_tc with SDPA flash's softmax arithmetic, timed beside the no-ftz build, the measured build and SDPA flash.

    python3 research/scripts/fa2_tc_flashexp.py OUT.json

research/csrc/fa2_tc_flashexp.cu is the no-ftz build (research/scripts/fa2_tc_noftz.py) with each score scaled and
shifted by an FMUL and an FADD in place of fa2_tc's FFMA, as FlashAttention-2's compiled loop has it: one more
FP32-class instruction a score, and a chain of seven dependent ones before and after each MUFU.EX2 where the no-ftz
build has six and fa2_tc three. The same checks and interleaved timing as fa2_tc_noftz.py, at the three tiles SDPA
flash runs at d 32, 64 and 128 and the d 32 64 x 64 tile. What it asks: is SDPA flash's cost at d = 32 over the
no-ftz build (16-17% against 6% over fa2_tc at its 128 x 128 tile) its longer chain."""

import common
import fa2_tc_noftz

TILES = [(32, 128, 128, 4), (32, 64, 64, 4), (64, 128, 128, 4), (128, 128, 64, 4)]


def main(path):
    fa2_tc_noftz.run(path, {"fa2_tc_noftz": ("fa2_tc_noftz.cu", "noftz"),
                            "fa2_tc_flashexp": ("fa2_tc_flashexp.cu", "flashexp")}, TILES)


if __name__ == "__main__":
    common.run_script(main)
