"""`dragoman translate` refuses bad decoding options in one line, before the model loads."""

import pytest

from dragoman.app.cli import main


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--length-penalty", "nan", "length_penalty must be a number from -10 to 10, not nan"),
        ("--length-penalty", "inf", "length_penalty must be a number from -10 to 10, not inf"),
        ("--repetition-penalty", "nan", "repetition_penalty must be a number from 0.01 to 100, not nan"),
        ("--repetition-penalty", "-inf", "repetition_penalty must be a number from 0.01 to 100, not -inf"),
        ("--beams", "0", "num_beams must be an integer from 1 to 128, not 0"),
        ("--beams", "100000", "num_beams must be an integer from 1 to 128, not 100000"),
        ("--max-length", "1000000000", "max_length must be an integer from 2 to 4096, not 1000000000"),
        ("--no-repeat-ngram-size", "-1", "no_repeat_ngram_size must be an integer from 0 to 4096, not -1"),
    ],
)
def test_bad_options_are_one_line_usage_errors(tmp_path, capsys, flag, value, message):
    # No model folder exists: the options are refused before anything is read.
    args = ["translate", "--model", str(tmp_path / "no-model"), "--from", "eng_Latn", "--to", "fra_Latn", f"{flag}={value}"]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"dragoman: error: {message}\n"
